import { PLAYER, type Outcome, type View, type Welcome } from "./protocol";

export interface Entity {
  id: number;
  x: number;
  y: number;
  /** ACTOR or PLAYER. */
  kind: number;
}

/**
 * What the client knows of the world: its own entity and cell, and the
 * entities of its viewport, kept in world coordinates so that the view can
 * be redrawn around the player as soon as a move's outcome arrives, without
 * waiting for the next view delta.
 */
export class WorldModel {
  selfId: number | undefined;
  x = 0;
  y = 0;
  width = 0;
  height = 0;
  viewRadius = 8;
  tickMs = 100;
  /** The player's emoji and name, as the server knows them ("" for no name). */
  avatar = "😀";
  name = "";
  readonly entities = new Map<number, Entity>();

  applyWelcome(welcome: Welcome): void {
    this.selfId = welcome.id;
    this.x = welcome.x;
    this.y = welcome.y;
    this.width = welcome.width;
    this.height = welcome.height;
    this.viewRadius = welcome.view_radius;
    this.tickMs = welcome.tick_ms;
    this.avatar = welcome.avatar || "😀";
    this.name = welcome.name;
    this.entities.clear();
  }

  /** A full view replaces everything; a delta adds or moves entities and erases `gone`. */
  applyView(view: View): void {
    if (view.full) {
      this.entities.clear();
      // A full view is centred on the player: it is the authority on where we stand.
      this.x = view.x;
      this.y = view.y;
    }
    for (const [id, x, y, kind] of view.entities) {
      const known = this.entities.get(id);
      if (known) {
        known.x = x;
        known.y = y;
        known.kind = kind;
      } else {
        this.entities.set(id, { id, x, y, kind });
      }
    }
    for (const id of view.gone) this.entities.delete(id);
  }

  /**
   * An outcome carries the player's cell after the move, whatever the result.
   * It, not the own entity's place in a view delta, moves the avatar: a delta
   * built before the move can arrive after its outcome.
   */
  applyOutcome(outcome: Outcome): void {
    this.x = outcome.x;
    this.y = outcome.y;
  }

  /** The entity on a cell, if the client knows one there (its own avatar first). */
  entityAt(x: number, y: number): Entity | undefined {
    if (this.selfId !== undefined && x === this.x && y === this.y) {
      return { id: this.selfId, x, y, kind: PLAYER };
    }
    for (const entity of this.entities.values()) {
      if (entity.x === x && entity.y === y && entity.id !== this.selfId) return entity;
    }
    return undefined;
  }
}
