// How long a hint stays before it fades (the fade itself is style.css's).
const HINT_MS = 1200;

/** The timers a Hint runs on: the page's by default, a test's own clock in node. */
export interface Timers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const pageTimers: Timers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout> | undefined),
};

/**
 * The short-lived line under the HUD's numbers: why a move was refused, or
 * what the server said. Each hint stays HINT_MS from when it was shown; a
 * new one starts that time again.
 *
 * A refusal's hint also goes as soon as a later move succeeds: the player
 * has walked on, and a timer alone would let any later refusal keep it up
 * while the avatar moves. Outcomes nearly always come in the order of their
 * moves, but not always (a `busy` is answered at once, a move made during a
 * handoff only after it), so the hint follows the newest move answered: the
 * outcome of an older one changes nothing.
 */
export class Hint {
  private timer: unknown;
  // The newest move answered so far (seqs start at 1 and keep growing across reconnects).
  private newestSeq = 0;
  // Whether the hint shown is a refusal's, which a successful move takes away.
  private refusalShown = false;

  constructor(
    private readonly render: (text: string | undefined) => void,
    private readonly timers: Timers = pageTimers,
    private readonly lifetimeMs = HINT_MS,
  ) {}

  /** Shows a notice (not about one move) for its time. */
  show(text: string): void {
    this.display(text);
    this.refusalShown = false;
  }

  /** A move's outcome: `refusal` says why it was refused, undefined that it succeeded. */
  settle(seq: number, refusal: string | undefined): void {
    if (seq <= this.newestSeq) return;
    this.newestSeq = seq;
    if (refusal !== undefined) {
      this.display(refusal);
      this.refusalShown = true;
    } else if (this.refusalShown) {
      this.hide();
    }
  }

  private display(text: string): void {
    this.timers.clearTimeout(this.timer);
    this.render(text);
    this.timer = this.timers.setTimeout(() => this.hide(), this.lifetimeMs);
  }

  private hide(): void {
    this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.refusalShown = false;
    this.render(undefined);
  }
}
