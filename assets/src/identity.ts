/**
 * Who this browser plays as: an account made from a device id the browser
 * keeps in localStorage, logged into with `POST /api/device_login` (see
 * docs/api.md). The token is kept too, so a reload or a reconnect plays the
 * same account, which starts where it last stood. A server without accounts
 * (404) is played as a guest, with no token.
 */
import { backoffMs } from "@grove/client";

const DEVICE_KEY = "grove.device";
const TOKEN_KEY = "grove.token";
/** Logins refused 503 or 429 (a login storm) are tried again this many times. */
const RETRIES = 3;

export class Identity {
  /** The token to join with: the kept one, or a fresh device login; "" plays as a guest. */
  async token(): Promise<string> {
    const kept = read(TOKEN_KEY);
    if (kept) return kept;

    try {
      const response = await this.login();
      if (response.status === 404) return "";
      if (!response.ok) throw new Error(`device login answered ${response.status}`);
      const body = (await response.json()) as { token?: unknown };
      if (typeof body.token !== "string") throw new Error("device login gave no token");
      write(TOKEN_KEY, body.token);
      return body.token;
    } catch (error) {
      // The join will say whether guests may play; the reconnect loop retries.
      console.warn("grove: cannot log in:", error);
      return "";
    }
  }

  /** A device login; a busy server's refusal is waited out as it asks, with jitter, a few times. */
  private async login(): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const response = await fetch("/api/device_login", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ device_id: this.deviceId() }),
      });
      if ((response.status !== 503 && response.status !== 429) || attempt >= RETRIES) return response;
      await new Promise((resolve) => setTimeout(resolve, backoffMs(response.headers.get("retry-after"))));
    }
  }

  /** Whether this browser plays an account (whose avatar it may change), as far as it knows. */
  get hasAccount(): boolean {
    return Boolean(read(TOKEN_KEY));
  }

  /** Changes the account's avatar (PATCH /api/me); rejects with the server's reason. */
  async setAvatar(avatar: string): Promise<void> {
    const token = read(TOKEN_KEY);
    if (!token) throw new Error("no account to change");
    const response = await fetch("/api/me", {
      method: "PATCH",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ avatar }),
    });
    if (!response.ok) {
      const body = (await response.json().catch(() => ({}))) as { message?: unknown };
      throw new Error(typeof body.message === "string" ? body.message : `the server answered ${response.status}`);
    }
  }

  /** The server refused the token (expired, logged out, another server's): log in afresh next time. */
  forget(): void {
    remove(TOKEN_KEY);
  }

  private deviceId(): string {
    let id = read(DEVICE_KEY);
    if (!id) {
      id = typeof crypto.randomUUID === "function" ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`.slice(0, 64);
      write(DEVICE_KEY, id);
    }
    return id;
  }
}

// Storage can be off (private modes, sandboxed frames): then every page is a new device.
function read(key: string): string | null {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

function write(key: string, value: string): void {
  try {
    localStorage.setItem(key, value);
  } catch {
    // Nothing to keep it in; fine.
  }
}

function remove(key: string): void {
  try {
    localStorage.removeItem(key);
  } catch {
    // As above.
  }
}
