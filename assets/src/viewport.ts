import { Kinds } from "./kinds";
import { BACTERIUM, type Direction, type TerrainKind } from "@grove/client";
import type { Terrain } from "./terrain";
import type { Entity, WorldModel } from "@grove/client";

/** What a game shows on the board (see game.ts): a cell's layer, an entity's look. */
export interface GameLayer {
  cell(x: number, y: number): { emoji?: string; badge?: boolean } | undefined;
  look(id: number): string | undefined;
}

const terrainEmoji: Record<TerrainKind, string> = {
  meadow: "",
  flowers: "🌼",
  tree: "🌳",
  rock: "🪨",
  water: "🌊",
};

const noKinds = new Kinds();
const bacteriumEmoji = "🦠";
const selfEmoji = "😀";

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

/**
 * The grid of emoji cells around the player. Cells are reused between
 * frames and only those whose content changed are touched, so a redraw
 * after every outcome costs a few DOM writes.
 */
export class Viewport {
  private cells: HTMLElement[] = [];
  // Speech bubbles by speaker, kept over the speaker as it moves, until they time out.
  private readonly bubbles = new Map<number, { element: HTMLElement; timer: ReturnType<typeof setTimeout> }>();
  private drawn: string[] = [];
  private radius = -1;
  private drawnEntities = 0;

  constructor(private readonly root: HTMLElement) {}

  /** How many entities (the own avatar included) the last frame showed. */
  get entityCount(): number {
    return this.drawnEntities;
  }

  render(world: WorldModel, terrain: Terrain | undefined, kinds: Kinds = noKinds, game?: GameLayer): void {
    if (world.viewRadius !== this.radius) this.build(world.viewRadius);
    const side = 2 * this.radius + 1;
    const left = world.x - this.radius;
    const top = world.y - this.radius;

    const occupants = new Map<number, Entity>();
    for (const entity of world.entities.values()) {
      const col = entity.x - left;
      const row = entity.y - top;
      if (entity.id !== world.selfId && col >= 0 && row >= 0 && col < side && row < side) {
        occupants.set(row * side + col, entity);
      }
    }

    let count = 0;
    for (let row = 0; row < side; row++) {
      for (let col = 0; col < side; col++) {
        const index = row * side + col;
        const x = left + col;
        const y = top + row;
        const inside = x >= 0 && y >= 0 && x < world.width && y < world.height;
        // Each area's ground comes with it; the whole world's, where it was fetched, fills in.
        const ground = inside ? (world.groundAt(x, y) ?? terrain?.at(x, y) ?? "unknown") : "outside";
        const isSelf = world.selfId !== undefined && col === this.radius && row === this.radius;
        const occupant = isSelf ? undefined : occupants.get(index);

        let className = `cell ${ground}`;
        let text = ground in terrainEmoji ? terrainEmoji[ground as TerrainKind] : "";
        let name = "";
        // The game's layer: drawn in a corner over the ground, or instead of it.
        let badge = "";
        const layer = inside ? game?.cell(x, y) : undefined;
        if (layer?.emoji) {
          if (layer.badge) badge = layer.emoji;
          else {
            text = layer.emoji;
            className += " layer";
          }
        }
        let look = "";
        if (isSelf) {
          className += " self";
          text = world.avatar || selfEmoji;
          look = (world.selfId !== undefined && game?.look(world.selfId)) || "";
        } else if (occupant && occupant.kind === BACTERIUM) {
          className += " bacterium";
          text = bacteriumEmoji;
        } else if (occupant && kinds.isPlayer(occupant.kind)) {
          // Another player: its own avatar, and its name over it.
          const label = world.labelOf(occupant.id);
          className += " player";
          text = label?.avatar || kinds.draw(occupant.kind, occupant.id);
          name = label?.name ?? "";
          look = game?.look(occupant.id) ?? "";
        } else if (occupant) {
          className += " actor";
          text = kinds.draw(occupant.kind, occupant.id);
          look = game?.look(occupant.id) ?? "";
        }
        if (isSelf || occupant) count++;

        const signature = `${className}|${text}|${x},${y}|${name}|${badge}|${look}`;
        if (this.drawn[index] === signature) continue;
        this.drawn[index] = signature;
        const cell = this.cells[index] as HTMLElement;
        cell.className = className;
        cell.textContent = text;
        setData(cell, "badge", badge);
        setData(cell, "look", look);
        cell.dataset.x = String(x);
        cell.dataset.y = String(y);
        cell.dataset.id = occupant ? String(occupant.id) : isSelf ? String(world.selfId) : "";
        if (name) {
          cell.dataset.name = name;
          cell.title = name;
        } else if (cell.dataset.name !== undefined) {
          delete cell.dataset.name;
          cell.removeAttribute("title");
        }
      }
    }
    this.drawnEntities = count;
    this.placeBubbles(world);
  }

  /** A speech bubble over a speaker for a few seconds (a new line replaces its last). */
  say(id: number, text: string, world: WorldModel, durationMs = 6000): void {
    const old = this.bubbles.get(id);
    if (old) {
      clearTimeout(old.timer);
      old.element.remove();
    }
    const element = document.createElement("span");
    element.className = "bubble";
    element.dataset.id = String(id);
    element.textContent = text;
    this.root.append(element);
    const timer = setTimeout(() => {
      element.remove();
      this.bubbles.delete(id);
    }, durationMs);
    this.bubbles.set(id, { element, timer });
    this.placeBubbles(world);
  }

  /** Takes a speaker's bubble away (a muted player's). */
  unsay(id: number): void {
    const bubble = this.bubbles.get(id);
    if (!bubble) return;
    clearTimeout(bubble.timer);
    bubble.element.remove();
    this.bubbles.delete(id);
  }

  /** The bubbles shown now: who says what. */
  shownBubbles(): { id: number; text: string }[] {
    return [...this.bubbles]
      .filter(([, bubble]) => !bubble.element.hidden)
      .map(([id, bubble]) => ({ id, text: bubble.element.textContent ?? "" }));
  }

  // Over the speaker's cell, wherever it stands now; hidden while it is out of view.
  private placeBubbles(world: WorldModel): void {
    if (this.bubbles.size === 0) return;
    const side = 2 * this.radius + 1;
    for (const [id, { element }] of this.bubbles) {
      const at = id === world.selfId ? { x: world.x, y: world.y } : world.entities.get(id);
      const col = at ? at.x - (world.x - this.radius) : -1;
      const row = at ? at.y - (world.y - this.radius) : -1;
      element.hidden = col < 0 || row < 0 || col >= side || row >= side;
      if (element.hidden) continue;
      const cell = this.cells[row * side + col];
      if (!cell) continue;
      element.style.left = `${cell.offsetLeft + cell.offsetWidth / 2}px`;
      element.style.top = `${cell.offsetTop}px`;
    }
  }

  /** An emoji rising from a cell of the viewport and fading (a game's event); off screen, nothing. */
  pop(x: number, y: number, emoji: string, centre: { x: number; y: number }): void {
    const side = 2 * this.radius + 1;
    const col = x - (centre.x - this.radius);
    const row = y - (centre.y - this.radius);
    if (col < 0 || row < 0 || col >= side || row >= side) return;
    const cell = this.cells[row * side + col];
    if (!cell || typeof cell.animate !== "function") return;
    const float = document.createElement("span");
    float.className = "pop";
    float.textContent = emoji;
    cell.append(float);
    const animation = float.animate(
      [
        { transform: "translateY(0) scale(0.8)", opacity: 1 },
        { transform: "translateY(-90%) scale(1.1)", opacity: 0 },
      ],
      { duration: 900, easing: "ease-out" },
    );
    animation.onfinish = () => float.remove();
  }

  /** A small bump of the avatar toward where it could not go. */
  bump(direction: Direction | undefined): void {
    const self = this.root.querySelector<HTMLElement>(".cell.self");
    if (!self || typeof self.animate !== "function") return;
    const [dx, dy] = direction ? nudge[direction] : [0, 0];
    self.animate(
      [
        { transform: "translate(0, 0)" },
        { transform: `translate(${dx * 18}%, ${dy * 18}%)` },
        { transform: "translate(0, 0)" },
      ],
      { duration: 160, easing: "ease-out" },
    );
  }

  private build(radius: number): void {
    const side = 2 * radius + 1;
    this.radius = radius;
    this.root.style.setProperty("--side", String(side));
    this.cells = [];
    this.drawn = [];
    const fragment = document.createDocumentFragment();
    for (let i = 0; i < side * side; i++) {
      const cell = document.createElement("div");
      this.cells.push(cell);
      fragment.append(cell);
    }
    this.root.replaceChildren(fragment);
    for (const { element } of this.bubbles.values()) this.root.append(element);
  }
}

function setData(element: HTMLElement, name: string, value: string): void {
  if (value) element.dataset[name] = value;
  else delete element.dataset[name];
}
