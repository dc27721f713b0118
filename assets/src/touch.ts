import { REPEAT_MS, type MoveRequest } from "./input";
import type { Direction } from "@grove/client";

/** A swipe is a pointer that travels this far (CSS pixels) while down. */
export const SWIPE_PX = 24;
/** A pointer held down this long without travelling is a hold: walk until it lifts. */
export const HOLD_MS = 300;

const sectors: readonly Direction[] = ["e", "se", "s", "sw", "w", "nw", "n", "ne"];

/**
 * The direction a screen vector points to, one of eight (y grows down, as
 * on screen and in the world); undefined for no vector at all.
 *
 *     directionOf(10, 0) === "e";  directionOf(-3, -3) === "nw";  directionOf(2, 9) === "s"
 */
export function directionOf(dx: number, dy: number): Direction | undefined {
  if (dx === 0 && dy === 0) return undefined;
  const turn = Math.atan2(dy, dx) / (2 * Math.PI); // -0.5..0.5, clockwise from east
  return sectors[Math.round(turn * 8 + 8) % 8];
}

/**
 * One direction walked while something is held (a finger on the board, a
 * pad button): a step at once, then one every REPEAT_MS, toward whatever
 * the direction is by then, until it is let go.
 */
export class Walk {
  private direction: Direction | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly onMove: MoveRequest) {}

  get walking(): boolean {
    return this.direction !== undefined;
  }

  start(direction: Direction): void {
    this.stop();
    this.direction = direction;
    this.onMove(direction, performance.now(), false);
    this.timer = setInterval(() => {
      if (this.direction) this.onMove(this.direction, performance.now(), true);
    }, REPEAT_MS);
  }

  /** Walks on in another direction from the next step. */
  steer(direction: Direction | undefined): void {
    if (this.direction && direction) this.direction = direction;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.direction = undefined;
  }
}

interface Press {
  id: number;
  startX: number;
  startY: number;
  holdTimer: ReturnType<typeof setTimeout>;
  /** What the press has become: undecided yet, a swipe, or a hold. */
  mode: "pending" | "swipe" | "hold";
}

/**
 * Pointer gestures on the board, for fingers, pens and mice alike:
 *
 *   * a tap on a cell steps toward it (tapping the avatar itself is the
 *     board's action, as the pad's button);
 *   * a swipe steps the way it went, and keeps walking that way while the
 *     finger stays down (steered by where it moves);
 *   * a press held still walks toward the cell under the finger until it
 *     lifts, following it as it moves.
 *
 * Where the avatar is on screen comes from `avatarCentre()`: the board
 * keeps it in the middle, but the board may scroll or scale.
 */
export class BoardGestures {
  private press: Press | undefined;
  private readonly walk: Walk;

  constructor(
    private readonly board: HTMLElement,
    private readonly onMove: MoveRequest,
    private readonly onAction: () => void,
  ) {
    this.walk = new Walk(onMove);
  }

  attach(): void {
    this.board.addEventListener("pointerdown", (event) => this.down(event));
    this.board.addEventListener("pointermove", (event) => this.move(event));
    this.board.addEventListener("pointerup", (event) => this.up(event));
    this.board.addEventListener("pointercancel", (event) => this.cancel(event));
    this.board.addEventListener("lostpointercapture", (event) => this.cancel(event));
    // A long press would open the browser's context menu on some phones.
    this.board.addEventListener("contextmenu", (event) => event.preventDefault());
  }

  private down(event: PointerEvent): void {
    if (!event.isPrimary || event.button > 0 || this.press) return;
    event.preventDefault();
    // Moves and the lift come here even when the finger leaves the board.
    if (typeof this.board.setPointerCapture === "function") this.board.setPointerCapture(event.pointerId);
    const press: Press = {
      id: event.pointerId,
      startX: event.clientX,
      startY: event.clientY,
      mode: "pending",
      holdTimer: setTimeout(() => {
        if (this.press !== press || press.mode !== "pending") return;
        const direction = this.towardPoint(press.startX, press.startY);
        if (!direction) return;
        press.mode = "hold";
        this.walk.start(direction);
      }, HOLD_MS),
    };
    this.press = press;
  }

  private move(event: PointerEvent): void {
    const press = this.press;
    if (!press || event.pointerId !== press.id) return;
    const dx = event.clientX - press.startX;
    const dy = event.clientY - press.startY;
    if (press.mode === "pending" && Math.hypot(dx, dy) >= SWIPE_PX) {
      press.mode = "swipe";
      const direction = directionOf(dx, dy);
      if (direction) this.walk.start(direction);
    } else if (press.mode === "swipe") {
      this.walk.steer(directionOf(dx, dy));
    } else if (press.mode === "hold") {
      this.walk.steer(this.towardPoint(event.clientX, event.clientY));
    }
  }

  private up(event: PointerEvent): void {
    const press = this.press;
    if (!press || event.pointerId !== press.id) return;
    this.end(press);
    if (press.mode !== "pending") return;
    // A tap: a step toward the cell, or the action on the avatar itself.
    const direction = this.towardPoint(event.clientX, event.clientY);
    if (direction) this.onMove(direction, performance.now(), false);
    else this.onAction();
  }

  private cancel(event: PointerEvent): void {
    const press = this.press;
    if (press && event.pointerId === press.id) this.end(press);
  }

  private end(press: Press): void {
    clearTimeout(press.holdTimer);
    this.press = undefined;
    this.walk.stop();
  }

  // From the avatar's cell to the cell under a point; undefined on the avatar itself.
  private towardPoint(x: number, y: number): Direction | undefined {
    const self = this.board.querySelector<HTMLElement>(".cell.self");
    if (!self) return undefined;
    const box = self.getBoundingClientRect();
    const cellX = Math.floor((x - box.left) / box.width);
    const cellY = Math.floor((y - box.top) / box.height);
    return directionOf(cellX, cellY);
  }
}

/** What the pad's action button does, and how it is labelled. */
export interface PadAction {
  /** A few characters on the button, an emoji first, e.g. "🦠 Seed". */
  label: string;
  /** Said to screen readers and on hover. */
  title: string;
  run(): void;
}

/**
 * The on-screen pad, shown on touch screens: eight arrows around the
 * action button (hold an arrow to keep walking), and a row of buttons
 * that games and the page add to (`addButton`). What the action button
 * does is `setAction`'s: seeding bacteria by default, a game's own
 * action once its client module sets one.
 */
export class Pad {
  private readonly actionButton: HTMLButtonElement;
  private readonly extras: HTMLElement;
  private action: PadAction;

  constructor(
    private readonly root: HTMLElement,
    onMove: MoveRequest,
    action: PadAction,
  ) {
    this.action = action;
    const arrows = document.createElement("div");
    arrows.className = "pad-arrows";
    const layout: (Direction | "act")[] = ["nw", "n", "ne", "w", "act", "e", "sw", "s", "se"];
    const glyphs: Record<Direction, string> = { n: "↑", ne: "↗", e: "→", se: "↘", s: "↓", sw: "↙", w: "←", nw: "↖" };
    let actionButton: HTMLButtonElement | undefined;
    for (const slot of layout) {
      const button = document.createElement("button");
      button.type = "button";
      if (slot === "act") {
        button.className = "pad-act";
        button.addEventListener("click", () => this.action.run());
        actionButton = button;
      } else {
        button.className = "pad-arrow";
        button.dataset.dir = slot;
        button.textContent = glyphs[slot];
        button.setAttribute("aria-label", `walk ${slot}`);
        holdToWalk(button, slot, new Walk(onMove));
      }
      arrows.append(button);
    }
    this.actionButton = actionButton as HTMLButtonElement;
    this.extras = document.createElement("div");
    this.extras.className = "pad-extras";
    this.root.replaceChildren(arrows, this.extras);
    this.showAction();
  }

  /** Makes the action button do something else (a game's action), or seeding again. */
  setAction(action: PadAction): void {
    this.action = action;
    this.showAction();
  }

  /** Does what the action button does. */
  activate(): void {
    this.action.run();
  }

  /**
   * A button in the pad's row, e.g. to chat or to pick what to seed: an
   * emoji (drawn with the board's font) and a word. Returns a function
   * that relabels it.
   */
  addButton(emoji: string, text: string, title: string, onPress: () => void): (text: string) => void {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "pad-extra";
    button.title = title;
    button.setAttribute("aria-label", title);
    const icon = document.createElement("span");
    icon.className = "emoji";
    icon.textContent = emoji;
    const word = document.createElement("span");
    word.textContent = text;
    button.append(icon, " ", word);
    button.addEventListener("click", onPress);
    this.extras.append(button);
    return (next) => {
      word.textContent = next;
    };
  }

  private showAction(): void {
    this.actionButton.textContent = this.action.label;
    this.actionButton.title = this.action.title;
    this.actionButton.setAttribute("aria-label", this.action.title);
  }
}

// An arrow of the pad: walks while pressed, by finger or mouse.
function holdToWalk(button: HTMLElement, direction: Direction, walk: Walk): void {
  let pointer: number | undefined;
  button.addEventListener("pointerdown", (event) => {
    if (pointer !== undefined || event.button > 0) return;
    event.preventDefault();
    pointer = event.pointerId;
    if (typeof button.setPointerCapture === "function") button.setPointerCapture(event.pointerId);
    button.classList.add("pressed");
    walk.start(direction);
  });
  const release = (event: PointerEvent) => {
    if (event.pointerId !== pointer) return;
    pointer = undefined;
    button.classList.remove("pressed");
    walk.stop();
  };
  button.addEventListener("pointerup", release);
  button.addEventListener("pointercancel", release);
  button.addEventListener("lostpointercapture", release);
  button.addEventListener("contextmenu", (event) => event.preventDefault());
}
