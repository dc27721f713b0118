/**
 * A token bucket under the server's limit (20 moves a second, bursts of
 * 10), so that fast tapping is slowed here instead of being dropped there.
 */
export class MovePacer {
  private tokens: number;
  private updatedAt: number;

  /**
   * `now` is the clock in milliseconds; a test passes its own, so that
   * what it asserts does not depend on how fast the machine runs.
   */
  constructor(
    private readonly burst = 6,
    private readonly intervalMs = 60,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.updatedAt = now();
  }

  /** Takes a token if there is one. */
  take(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Milliseconds until the next token. */
  wait(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : (1 - this.tokens) * this.intervalMs;
  }

  private refill(): void {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + (now - this.updatedAt) / this.intervalMs);
    this.updatedAt = now;
  }
}
