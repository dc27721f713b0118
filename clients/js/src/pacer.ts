/**
 * A token bucket under the server's limit (20 moves a second, bursts of
 * 10), so that fast tapping is slowed here instead of being dropped there.
 */
export class MovePacer {
  private tokens: number;
  private updatedAt = performance.now();

  constructor(
    private readonly burst = 6,
    private readonly intervalMs = 60,
  ) {
    this.tokens = burst;
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
    const now = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + (now - this.updatedAt) / this.intervalMs);
    this.updatedAt = now;
  }
}
