// Asks GET /dashboard/data for what is new, once a second, and keeps asking
// when the server is away: a failed request is retried after 1, 2, 4, then
// every 5 seconds, and the history the page holds is kept meanwhile.
import { parseData, type DashboardData } from "./data";

export type PollState = "connecting" | "live" | "reconnecting" | "unauthorized";

export interface PollStatus {
  state: PollState;
  /** Consecutive failed requests. */
  failures: number;
  /** Why the last request failed. */
  error: string | undefined;
  /** When the next attempt is due (Date.now() ms), while reconnecting. */
  retryAt: number | undefined;
}

export interface PollerOptions {
  /** The newest sample's t the page holds (0 for everything). */
  since: () => number;
  onData: (data: DashboardData) => void;
  onStatus: (status: PollStatus) => void;
  intervalMs?: number;
  timeoutMs?: number;
}

/** The data URL for `since` (the login is the session cookie's, never in the URL). */
export function dataUrl(since: number): string {
  const query = new URLSearchParams({ since: String(Math.max(0, Math.floor(since))) });
  return `/dashboard/data?${query}`;
}

/** Milliseconds before retry number `failures` (1, 2, 4, then 5 s). */
export function retryDelay(failures: number): number {
  return Math.min(5000, 1000 * 2 ** Math.max(0, failures - 1));
}

export class Poller {
  private status: PollStatus = { state: "connecting", failures: 0, error: undefined, retryAt: undefined };
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running = false;
  requests = 0;
  failuresTotal = 0;

  constructor(private readonly options: PollerOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.options.onStatus(this.status);
    void this.poll();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** Asks again at once (the "retry now" button). */
  retryNow(): void {
    if (!this.running || this.status.state === "live") return;
    clearTimeout(this.timer);
    void this.poll();
  }

  current(): PollStatus {
    return this.status;
  }

  private async poll(): Promise<void> {
    const started = Date.now();
    const interval = this.options.intervalMs ?? 1000;
    const controller = new AbortController();
    const abort = setTimeout(() => controller.abort(), this.options.timeoutMs ?? 5000);
    this.requests++;
    let next: number;
    try {
      const response = await fetch(dataUrl(this.options.since()), {
        cache: "no-store",
        signal: controller.signal,
        headers: { Accept: "application/json" },
      });
      if (response.status === 401) {
        this.fail("unauthorized", "the login is missing or expired: reload this page to log in again");
        next = 10_000;
      } else if (!response.ok) {
        throw new Error(`HTTP ${response.status}`);
      } else {
        const data = parseData(await response.json());
        this.options.onData(data);
        this.setStatus({ state: "live", failures: 0, error: undefined, retryAt: undefined });
        next = Math.max(0, interval - (Date.now() - started));
      }
    } catch (error) {
      const message = controller.signal.aborted
        ? "no answer in time"
        : error instanceof TypeError
          ? "the server cannot be reached"
          : error instanceof Error
            ? error.message
            : String(error);
      next = retryDelay(this.status.failures + 1);
      this.fail("reconnecting", message, next);
    } finally {
      clearTimeout(abort);
    }
    if (this.running) this.timer = setTimeout(() => void this.poll(), next);
  }

  private fail(state: PollState, error: string, delay?: number): void {
    this.failuresTotal++;
    this.setStatus({
      state,
      failures: this.status.failures + 1,
      error,
      retryAt: delay === undefined ? undefined : Date.now() + delay,
    });
  }

  private setStatus(status: PollStatus): void {
    const changed =
      status.state !== this.status.state || status.error !== this.status.error || status.failures !== this.status.failures;
    this.status = status;
    if (changed) this.options.onStatus(status);
  }
}
