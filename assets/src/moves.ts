import type { Direction, MoveResult, Outcome } from "@grove/client";

export interface PendingMove {
  seq: number;
  direction: Direction;
  /** performance.now() at the key press (or repeat) that asked for the move. */
  startedAt: number;
  /** performance.now() when the move went out (later than startedAt when paced). */
  sentAt: number;
}

/** Where the time of one successful move went, in ms from its key press. */
export interface MoveTiming {
  seq: number;
  /** The move left for the server. */
  sent: number;
  /** Its outcome arrived and the avatar was redrawn in the DOM. */
  answered: number;
  /** The animation frame showing it began: the latency. */
  shown: number;
}

// Enough history for a benchmark run, bounded for a page left open all day.
const HISTORY_LIMIT = 100_000;
// A move dropped by the server's rate limit gets no outcome; forget it after this.
const PENDING_LIMIT_MS = 10_000;

/**
 * Sequence numbers, the moves awaiting their outcome, and what became of
 * them: each seq's result, and each successful move's latency from key
 * press to the frame that showed it.
 */
export class MoveLog {
  private nextSeq = 1;
  private readonly pending = new Map<number, PendingMove>();
  /** Each move's result, with its direction when this page sent it (not after a reload). */
  readonly results: { seq: number; result: MoveResult; direction: Direction | undefined }[] = [];
  readonly timings: MoveTiming[] = [];
  private readonly waiters = new Map<number, ((result: MoveResult) => void)[]>();

  /** The last sequence number used (0 before the first move). */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  start(direction: Direction, startedAt: number): PendingMove {
    const now = performance.now();
    for (const [seq, move] of this.pending) {
      if (now - move.startedAt < PENDING_LIMIT_MS) break;
      this.pending.delete(seq);
    }
    const move = { seq: this.nextSeq++, direction, startedAt, sentAt: now };
    this.pending.set(move.seq, move);
    return move;
  }

  settle(outcome: Outcome): PendingMove | undefined {
    const move = this.pending.get(outcome.seq);
    remember(this.results, { seq: outcome.seq, result: outcome.result, direction: move?.direction });
    this.pending.delete(outcome.seq);
    // A successful move is done once shown (recordShown); any other now.
    if (outcome.result !== "ok" || !move) this.finish(outcome.seq, outcome.result);
    return move;
  }

  /** Records a successful move, answered and drawn at `answeredAt`, shown at `shownAt`. */
  recordShown(move: PendingMove, answeredAt: number, shownAt: number): void {
    remember(this.timings, {
      seq: move.seq,
      sent: move.sentAt - move.startedAt,
      answered: answeredAt - move.startedAt,
      shown: shownAt - move.startedAt,
    });
    this.finish(move.seq, "ok");
  }

  /**
   * Resolves with a move's result once it is complete: refused, or shown on
   * screen. Lets a benchmark wait without polling the page every frame.
   */
  whenDone(seq: number): Promise<MoveResult> {
    const settled = lastWith(this.results, seq);
    if (settled && (settled.result !== "ok" || lastWith(this.timings, seq))) {
      return Promise.resolve(settled.result);
    }
    return new Promise((resolve) => {
      const waiting = this.waiters.get(seq) ?? [];
      waiting.push(resolve);
      this.waiters.set(seq, waiting);
    });
  }

  private finish(seq: number, result: MoveResult): void {
    const waiting = this.waiters.get(seq);
    this.waiters.delete(seq);
    for (const resolve of waiting ?? []) resolve(result);
  }

  /** Moves sent on a lost connection will never be answered. Sequence numbers keep growing. */
  forgetPending(): void {
    this.pending.clear();
  }
}

// The newest entry for a seq: the one wanted is nearly always near the end.
function lastWith<T extends { seq: number }>(history: T[], seq: number): T | undefined {
  for (let i = history.length - 1; i >= 0; i--) if (history[i]!.seq === seq) return history[i];
  return undefined;
}

function remember<T>(history: T[], item: T): void {
  if (history.length >= HISTORY_LIMIT) history.splice(0, history.length - HISTORY_LIMIT + 1);
  history.push(item);
}
