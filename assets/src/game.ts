import type { ActResult, Data, Direction, Target } from "@grove/client";

/**
 * The world's game, on the page: what `GET /game` says of it (its actions
 * and its legend), and the controls to act: a button per action, its key,
 * and Space for whatever fits the cell the player faces. What the areas
 * show of it (cells' codes, entities' looks, events) the client library
 * keeps (`WorldModel.cellCode`, `lookOf`, the `event` event). Kept apart
 * from walking, so that other controls (touch) can call `act()` too.
 */

export interface ActionInfo {
  name: string;
  args: [string, string][];
  key?: string;
  label?: string;
  emoji?: string;
  /** Cell codes this action is for: pressing it aims at a neighbour showing one. */
  cells?: number[];
  hidden?: boolean;
}

export interface CodeInfo {
  name?: string;
  emoji?: string;
  /** Drawn small in a corner of the cell, over its ground, rather than instead of it. */
  badge?: boolean;
}

export interface GameInfo {
  game: string;
  title: string;
  help: string;
  actions: ActionInfo[];
  cells: Map<number, CodeInfo>;
  looks: Map<number, CodeInfo>;
  events: Map<string, string>;
  reasons: Map<string, string>;
  board: { title: string; unit: string } | undefined;
}

/** Parses a `GET /game` body; `undefined` for a world without a game. */
export function parseGame(body: unknown): GameInfo | undefined {
  const json = (body ?? {}) as Record<string, unknown>;
  if (typeof json.game !== "string") return undefined;
  const record = (value: unknown): Record<string, unknown> =>
    value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  const codes = (value: unknown): Map<number, CodeInfo> =>
    new Map(Object.entries(record(value)).map(([code, info]) => [Number(code), record(info) as CodeInfo]));
  const strings = (value: unknown): Map<string, string> =>
    new Map(Object.entries(record(value)).filter((entry): entry is [string, string] => typeof entry[1] === "string"));

  const actions = Object.entries(record(json.actions))
    .map(([name, info]) => ({ name, ...(record(info) as Omit<ActionInfo, "name">) }))
    .sort((a, b) => a.name.localeCompare(b.name));
  const board = record(json.board);

  return {
    game: json.game,
    title: typeof json.title === "string" ? json.title : json.game,
    help: typeof json.help === "string" ? json.help : "",
    actions,
    cells: codes(json.cells),
    looks: codes(json.looks),
    events: strings(json.events),
    reasons: strings(json.reasons),
    board:
      typeof board.title === "string"
        ? { title: board.title, unit: typeof board.unit === "string" ? board.unit : "" }
        : undefined,
  };
}

export async function fetchGame(): Promise<GameInfo | undefined> {
  const response = await fetch("/game", { cache: "no-store" });
  if (!response.ok) throw new Error(`GET /game answered ${response.status}`);
  return parseGame(await response.json());
}

export interface BoardEntry {
  name: string;
  score: number;
}

export async function fetchBoard(): Promise<BoardEntry[]> {
  const response = await fetch("/game/board", { cache: "no-store" });
  if (!response.ok) throw new Error(`GET /game/board answered ${response.status}`);
  const top = ((await response.json()) as { top?: unknown }).top;
  if (!Array.isArray(top)) return [];
  return top.filter(
    (entry): entry is BoardEntry =>
      typeof entry?.name === "string" && typeof entry?.score === "number",
  );
}

const nudge: Record<Direction, [number, number]> = {
  n: [0, -1],
  ne: [1, -1],
  e: [1, 0],
  se: [1, 1],
  s: [0, 1],
  sw: [-1, 1],
  w: [-1, 0],
  nw: [-1, -1],
};
const around: Direction[] = ["n", "ne", "e", "se", "s", "sw", "w", "nw"];

/**
 * Where an action should aim: the cell the player faces when it shows one
 * of the action's codes, else the first neighbour that does, else the
 * cell faced (the game will say why not). An action without codes aims
 * where the player faces.
 */
export function aim(
  action: ActionInfo,
  at: { x: number; y: number },
  facing: Direction,
  codeAt: (x: number, y: number) => number,
): Target {
  const wanted = action.cells;
  if (!wanted || wanted.length === 0) return facing;
  const shows = (direction: Direction): boolean => {
    const [dx, dy] = nudge[direction];
    return wanted.includes(codeAt(at.x + dx, at.y + dy));
  };
  if (shows(facing)) return facing;
  const start = around.indexOf(facing);
  for (let turn = 1; turn < 8; turn++) {
    const direction = around[(start + turn) % 8] as Direction;
    if (shows(direction)) return direction;
  }
  return facing;
}

/**
 * The action that fits what is around the player (Space): one for the
 * cell it faces, else one for any cell next to it, else none.
 */
export function fitting(
  actions: readonly ActionInfo[],
  at: { x: number; y: number },
  facing: Direction,
  codeAt: (x: number, y: number) => number,
): ActionInfo | undefined {
  const codeTo = (direction: Direction): number => codeAt(at.x + nudge[direction][0], at.y + nudge[direction][1]);
  const faced = codeTo(facing);
  return (
    actions.find((action) => action.cells?.includes(faced)) ??
    actions.find((action) => around.some((direction) => action.cells?.includes(codeTo(direction))))
  );
}

/**
 * The game's panel and keys: a button per action (with its emoji, label
 * and key), Space for the action that fits, a line for what the player
 * carries and scores (from the game's answers), the leaderboard, and what
 * a refusal means, in the game's words.
 */
export class GameControls {
  private readonly buttons = new Map<string, HTMLButtonElement>();
  private carried = "";
  private score: number | undefined;

  constructor(
    private readonly root: HTMLElement,
    private readonly info: GameInfo,
    private readonly onAct: (action: ActionInfo) => void,
  ) {
    this.build();
  }

  get actions(): ActionInfo[] {
    return this.info.actions.filter((action) => !action.hidden);
  }

  /** Keys: each action's own, and Space for the one that fits. True when the key was the game's. */
  keyDown(event: KeyboardEvent, fit: () => ActionInfo | undefined): boolean {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return false;
    const action =
      event.code === "Space"
        ? fit()
        : this.actions.find((candidate) => candidate.key && event.code === `Key${candidate.key.toUpperCase()}`);
    if (!action) return false;
    event.preventDefault();
    this.press(action);
    return true;
  }

  /** What an answer says of the player: its data, or why not. */
  acted(result: ActResult, data: Data, reason: string): string | undefined {
    if (typeof data.carrying === "number") this.carried = this.looks(data.carrying);
    if (typeof data.score === "number") {
      this.carried = "";
      this.score = data.score;
    }
    this.writeStatus();
    if (result === "ok") return undefined;
    if (result === "refused") return this.info.reasons.get(reason) ?? `Not now (${reason}).`;
    if (result === "rate_limited") return "Easy, not so fast!";
    return reason || `Not now (${result}).`;
  }

  /** What the look of the player's own entity says it carries. */
  setOwnLook(look: number): void {
    this.carried = look > 0 ? (this.info.looks.get(look)?.emoji ?? "") : "";
    this.writeStatus();
  }

  setBoard(entries: BoardEntry[]): void {
    const list = this.root.querySelector<HTMLOListElement>(".game-board ol");
    if (!list) return;
    const unit = this.info.board?.unit ?? "";
    list.replaceChildren(
      ...entries.map((entry) => {
        const item = document.createElement("li");
        const name = document.createElement("span");
        name.textContent = entry.name;
        const score = document.createElement("span");
        score.className = "score";
        score.textContent = `${entry.score} ${unit}`.trim();
        item.append(name, score);
        return item;
      }),
    );
    if (entries.length === 0) {
      const item = document.createElement("li");
      item.className = "empty";
      item.textContent = "Nobody yet: be the first.";
      list.append(item);
    }
  }

  private looks(carrying: number): string {
    return carrying > 0 ? (this.info.looks.get(carrying)?.emoji ?? String(carrying)) : "";
  }

  private press(action: ActionInfo): void {
    const button = this.buttons.get(action.name);
    button?.animate?.([{ transform: "scale(0.92)" }, { transform: "scale(1)" }], { duration: 140 });
    this.onAct(action);
  }

  private writeStatus(): void {
    const status = this.root.querySelector<HTMLElement>(".game-status");
    if (!status) return;
    const parts = [this.carried ? `carrying ${this.carried}` : "empty hands"];
    if (this.score !== undefined) parts.push(`score ${this.score}`);
    const text = parts.join(" · ");
    if (status.textContent !== text) status.textContent = text;
  }

  private build(): void {
    const title = document.createElement("h2");
    title.textContent = this.info.title;
    const help = document.createElement("p");
    help.className = "game-help";
    help.textContent = this.info.help;

    const bar = document.createElement("div");
    bar.className = "game-actions";
    for (const action of this.actions) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.action = action.name;
      const emoji = document.createElement("span");
      emoji.className = "emoji";
      emoji.textContent = action.emoji ?? "";
      const label = document.createElement("span");
      label.textContent = action.label ?? action.name;
      button.append(emoji, label);
      if (action.key) {
        const key = document.createElement("kbd");
        key.textContent = action.key;
        button.append(key);
      }
      // Taps act at once: no 300 ms wait, no focus stolen from the keys.
      button.addEventListener("pointerdown", (event) => {
        event.preventDefault();
        this.press(action);
      });
      button.addEventListener("click", (event) => {
        // A keyboard's Enter on a focused button (pointerdown already acted for a pointer).
        if (event.detail === 0) this.press(action);
      });
      this.buttons.set(action.name, button);
      bar.append(button);
    }

    const keys = document.createElement("p");
    keys.className = "game-keys";
    keys.append("Face what you want with the arrows, then press its key, tap its button, or ");
    const space = document.createElement("kbd");
    space.textContent = "Space";
    keys.append(space, " for whatever fits.");

    const status = document.createElement("p");
    status.className = "game-status";

    const parts: HTMLElement[] = [title, help, bar, keys, status];
    if (this.info.board) {
      const board = document.createElement("section");
      board.className = "game-board";
      const heading = document.createElement("h3");
      heading.textContent = this.info.board.title;
      board.append(heading, document.createElement("ol"));
      parts.push(board);
    }
    this.root.replaceChildren(...parts);
    this.root.hidden = false;
    this.writeStatus();
  }
}
