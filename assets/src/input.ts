import type { Direction } from "@grove/client";

// By physical key (KeyboardEvent.code), so WASD sits under the left hand on
// any layout.
const keyDirections: Readonly<Record<string, Direction>> = {
  ArrowUp: "n",
  ArrowRight: "e",
  ArrowDown: "s",
  ArrowLeft: "w",
  KeyW: "n",
  KeyD: "e",
  KeyS: "s",
  KeyA: "w",
};

/**
 * Asks for a step: `startedAt` is when the press that wants it happened,
 * `repeated` whether it repeats a held one (a repeat the pacer cannot
 * send now is dropped rather than queued).
 */
export type MoveRequest = (direction: Direction, startedAt: number, repeated: boolean) => void;

/** While a key (or a finger) is held, one move every this many milliseconds (the server allows 20 a second). */
export const REPEAT_MS = 120;

/**
 * Arrow keys and WASD to directions. A press moves once, however long it
 * lasts: a slow tap, or a keyup late because the machine is busy, is still
 * one step. A key is held once the browser repeats it (its first
 * `event.repeat`, after the user's own repeat delay); from then on it walks
 * every REPEAT_MS (the browser's repeat rate is the user's setting, not
 * ours) until it is released. Every other key is left alone.
 */
export class Keyboard {
  // Held movement keys, the most recent last: it is the one that walks.
  private held: string[] = [];
  // Whether a key has been seen held (repeated) since the first one went down.
  private walking = false;
  private repeatTimer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly onMove: MoveRequest) {}

  attach(target: Window): void {
    target.addEventListener("keydown", (event) => this.keyDown(event));
    target.addEventListener("keyup", (event) => this.keyUp(event));
    // Keys released while the page had no focus never send keyup.
    target.addEventListener("blur", () => this.releaseAll());
  }

  private keyDown(event: KeyboardEvent): void {
    // Leave shortcuts such as Ctrl+R or Alt+Left to the browser, and
    // letters typed into a field (a name, a line to say) to the field.
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event)) return;
    const direction = keyDirections[event.code];
    if (!direction) return;
    event.preventDefault(); // arrow keys would scroll the page
    if (event.repeat) {
      // The browser says the newest key is held: walk, at our own pace.
      if (this.held[this.held.length - 1] === event.code && this.repeatTimer === undefined) {
        this.walking = true;
        this.repeat();
        this.startWalking();
      }
      return;
    }
    if (this.held.includes(event.code)) return;

    this.held.push(event.code);
    this.onMove(direction, performance.now(), false);
    // A new press is one step; it walks once the browser repeats it.
    this.stopWalking();
  }

  private keyUp(event: KeyboardEvent): void {
    const index = this.held.indexOf(event.code);
    if (index < 0) return;
    this.held.splice(index, 1);
    if (this.held.length === 0) this.releaseAll();
    // A key still held from before walks on (the browser repeats only the newest).
    else if (this.walking && this.repeatTimer === undefined) this.startWalking();
  }

  private repeat(): void {
    const code = this.held[this.held.length - 1];
    const direction = code === undefined ? undefined : keyDirections[code];
    if (direction) this.onMove(direction, performance.now(), true);
  }

  private startWalking(): void {
    this.repeatTimer = setInterval(() => this.repeat(), REPEAT_MS);
  }

  private stopWalking(): void {
    clearInterval(this.repeatTimer);
    this.repeatTimer = undefined;
  }

  private releaseAll(): void {
    this.held = [];
    this.walking = false;
    this.stopWalking();
  }
}

/** Whether a key press is typing into a field (the page's keys leave it alone). */
export function typing(event: Event): boolean {
  const target = event.target as HTMLElement | null;
  return !!target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}
