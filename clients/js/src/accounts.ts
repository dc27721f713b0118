/**
 * The HTTP API's device login (docs/api.md), for a client that has no
 * token yet: the account of a device id, made the first time, and its
 * bearer token, to give `GroveClient` as `token`.
 *
 * A login the server turns away because it is busy (503) or because the
 * address logs in too often (429) is tried again, up to `retries` times,
 * after the server's `Retry-After` plus a random jitter of up to as much
 * again: the clients a login storm refused come back spread out, not all
 * at once, and the storm smooths itself.
 */
export interface LoginOptions {
  /** Refusals waited out before giving up (default 3). */
  retries?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof globalThis.fetch;
  /** Where the jitter comes from (default `Math.random`). */
  random?: () => number;
}

export interface Login {
  token: string;
  accountId: number;
  /** True the first time this device logged in. */
  created: boolean;
}

/** Refused for good: the last answer's status and error code. */
export class LoginRefused extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(`device login answered ${status} ${code}`);
  }
}

/** Logs in with a device id at the server whose page or API is at `url`. */
export async function deviceLogin(url: string, deviceId: string, options: LoginOptions = {}): Promise<Login> {
  const retries = options.retries ?? 3;
  const doFetch = options.fetch ?? globalThis.fetch;
  const endpoint = new URL("/api/device_login", url).toString();

  for (let attempt = 0; ; attempt++) {
    const response = await doFetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ device_id: deviceId }),
    });

    if ((response.status === 503 || response.status === 429) && attempt < retries) {
      const wait = backoffMs(response.headers.get("retry-after"), options.random);
      await new Promise((resolve) => setTimeout(resolve, wait));
      continue;
    }

    const body = (await response.json().catch(() => ({}))) as {
      token?: unknown;
      account?: { id?: unknown };
      created?: unknown;
      error?: unknown;
    };

    if (!response.ok || typeof body.token !== "string" || typeof body.account?.id !== "number") {
      throw new LoginRefused(response.status, typeof body.error === "string" ? body.error : "no_token");
    }

    return { token: body.token, accountId: body.account.id, created: body.created === true };
  }
}

/**
 * How long to wait after a refusal: the `Retry-After` in seconds (1 when
 * missing or not a number of seconds) plus a random jitter of up to as
 * much again.
 */
export function backoffMs(retryAfter: string | null, random: () => number = Math.random): number {
  const seconds = Number.parseInt(retryAfter ?? "", 10);
  const base = (Number.isFinite(seconds) && seconds > 0 ? seconds : 1) * 1000;
  return base + Math.floor(random() * base);
}
