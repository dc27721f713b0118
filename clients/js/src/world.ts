import {
  PLAYER,
  placeEntities,
  terrainKinds,
  type Area,
  type AreaPart,
  type Data,
  type Ground,
  type Names,
  type Outcome,
  type TerrainKind,
  type Welcome,
} from "./protocol.js";

export interface Entity {
  id: number;
  x: number;
  y: number;
  /** 0 an actor, 1 a player, 2 a bacterium, 3 and up an actor of a kind `GET /kinds` names. */
  kind: number;
}

/** What a player is called and looks like, as the server names it. */
export interface Label {
  name: string;
  avatar: string;
}

/** A short message an area told its viewers about one of its cells (a game's, a chat's). */
export interface GameEvent {
  /** The entity that caused it, 0 for none. */
  id: number;
  x: number;
  y: number;
  name: string;
  data: Data;
}

/**
 * What the client knows of the world: its own entity and cell, and the
 * areas around it (the zones its viewport overlaps), each as the server
 * last described it: a full snapshot, then deltas. The client assembles its
 * viewport from them, in world coordinates, so that the view can be redrawn
 * around the player as soon as a move's outcome arrives.
 *
 * An entity walking from one area into another is reported by both, in
 * either order: by the new one where it now stands, and by the old one as
 * gone. Only the area that last reported an entity may take it away, so it
 * is shown once, and never lost, whichever arrives first.
 *
 * Players' names come in a `names` message just before the area message
 * that brings them into view (a snapshot, or a delta they came in by),
 * never with their moves: a name is kept while its entity is known.
 *
 * In a world with a game (docs/protocol.md, "Games"), it also keeps what
 * the areas show of it: each area's cells' codes (`cellCode`) and every
 * entity's look (`lookOf`, kept by id, as an entity keeps its look from
 * one area to the next).
 */
export class WorldModel {
  selfId: number | undefined;
  /** The protocol version the server speaks with us, from `welcome`. */
  protocol = 0;
  x = 0;
  y = 0;
  width = 0;
  height = 0;
  viewRadius = 8;
  tickMs = 100;
  /** The longest the server lets pass between views while we stand still. */
  viewMs = 1000;
  /** The player's emoji and name, as the server knows them ("" for no name). */
  avatar = "😀";
  name = "";
  /** Every entity the client knows, each once, own avatar excluded or not as the areas say. */
  readonly entities = new Map<number, Entity>();
  private readonly areas = new Map<number, Map<number, Entity>>();
  private readonly where = new Map<number, number>();
  /** The names of the entities known, by id (players only). */
  private readonly labels = new Map<number, Label>();
  // Names that came for an area message not yet taken in.
  private readonly pendingNames = new Map<number, Names["names"]>();
  private readonly codes = new Map<number, Map<number, number>>();
  private readonly looks = new Map<number, number>();
  /**
   * Each area's ground, as its `ground` message gave it: kept for as long
   * as the connection (until a welcome or a resync), as the server sends
   * it once a connection.
   */
  private readonly ground = new Map<number, Ground>();

  applyWelcome(welcome: Welcome): void {
    this.selfId = welcome.id;
    this.protocol = welcome.protocol;
    this.x = welcome.x;
    this.y = welcome.y;
    this.width = welcome.width;
    this.height = welcome.height;
    this.viewRadius = welcome.view_radius;
    this.tickMs = welcome.tick_ms;
    this.viewMs = welcome.view_ms;
    this.avatar = welcome.avatar || "😀";
    this.name = welcome.name;
    this.forgetAreas();
  }

  /** An area's ground, which comes before its first snapshot on the connection; kept until a welcome or a resync. */
  applyGround(ground: Ground): void {
    this.ground.set(ground.area, ground);
  }

  /**
   * The ground at a cell, when an area the client holds covers it:
   * `groundCode` as the byte `GET /terrain` would give (0 meadow, 1 tree,
   * 2 rock, 3 water, 4 flowers), `groundAt` by name.
   */
  groundCode(x: number, y: number): number | undefined {
    for (const area of this.areas.keys()) {
      const ground = this.ground.get(area);
      if (!ground) continue;
      const dx = x - ground.x;
      const dy = y - ground.y;
      if (dx >= 0 && dy >= 0 && dx < ground.width && dy < ground.height) return ground.cells[dy * ground.width + dx];
    }
    return undefined;
  }

  groundAt(x: number, y: number): TerrainKind | undefined {
    const code = this.groundCode(x, y);
    return code === undefined ? undefined : (terrainKinds[code] ?? "meadow");
  }

  /** Names for the area message that follows (the server sends them just before it). */
  applyNames(names: Names): void {
    const pending = this.pendingNames.get(names.area);
    this.pendingNames.set(names.area, pending ? pending.concat(names.names) : names.names);
  }

  /**
   * An area's part of an `areas` message, its entities placed from the
   * area's ground (its corner and width), each that stayed in the area
   * (a delta's entity without its kind) of the kind the area showed it
   * with; a delta of an area not held is left for its snapshot to cover.
   */
  applyPart([area, full, entities, gone]: AreaPart): void {
    const ground = this.ground.get(area);
    const mirror = this.areas.get(area);
    if (!ground || (!full && !mirror)) return;
    const kindOf = (id: number): number | undefined => mirror?.get(id)?.kind ?? this.entities.get(id)?.kind;
    const placed = placeEntities(entities, ground, kindOf);
    this.applyArea({ type: "area", area, full, entities: placed, gone, cells: [], looks: [], events: [] });
  }

  /** A full area replaces what we had of it; a delta moves entities and erases `gone`. */
  applyArea(area: Area): void {
    const names = this.pendingNames.get(area.area);
    this.pendingNames.delete(area.area);
    let mirror = this.areas.get(area.area);
    if (area.full) {
      const old = mirror;
      mirror = new Map();
      this.areas.set(area.area, mirror);
      if (old) for (const id of old.keys()) this.release(area.area, id);
    } else if (!mirror) {
      // A delta for an area we were not shown: its snapshot will cover it.
      return;
    }
    for (const [id, x, y, kind] of area.entities) {
      const entity = { id, x, y, kind };
      mirror.set(id, entity);
      this.where.set(id, area.area);
      this.entities.set(id, entity);
    }
    for (const id of area.gone) {
      mirror.delete(id);
      this.release(area.area, id);
    }
    if (names) for (const [id, name, avatar] of names) if (this.entities.has(id)) this.labels.set(id, { name, avatar });
    this.applyGame(area);
  }

  /** A player's name and avatar, while it is known; undefined for actors and the unnamed. */
  labelOf(id: number): Label | undefined {
    if (id === this.selfId) return { name: this.name, avatar: this.avatar };
    return this.labels.get(id);
  }

  /** The named entities in the viewport (the player itself left out), nearest first. */
  nearby(): (Entity & Label & { distance: number })[] {
    const found: (Entity & Label & { distance: number })[] = [];
    for (const entity of this.inView()) {
      const label = this.labels.get(entity.id);
      if (!label || entity.id === this.selfId) continue;
      const distance = Math.max(Math.abs(entity.x - this.x), Math.abs(entity.y - this.y));
      found.push({ ...entity, ...label, distance });
    }
    return found.sort((a, b) => a.distance - b.distance || a.name.localeCompare(b.name));
  }

  // The game's cells (a snapshot's replace the area's; code 0 clears one)
  // and looks (0 for none).
  private applyGame(area: Area): void {
    let codes = this.codes.get(area.area);
    if (area.full || !codes) {
      codes = new Map();
      this.codes.set(area.area, codes);
    }
    for (const [x, y, code] of area.cells ?? []) {
      if (code === 0) codes.delete(cellKey(x, y));
      else codes.set(cellKey(x, y), code);
    }
    for (const [id, look] of area.looks ?? []) {
      if (look === 0) this.looks.delete(id);
      else this.looks.set(id, look);
    }
  }

  /** True while the client holds an area (it had its snapshot, and the viewport still reaches it). */
  holds(area: number): boolean {
    return this.areas.has(area);
  }

  /** What a game shows of a cell: its code, 0 for nothing (or a cell of no area held). */
  cellCode(x: number, y: number): number {
    const key = cellKey(x, y);
    for (const codes of this.codes.values()) {
      const code = codes.get(key);
      if (code !== undefined) return code;
    }
    return 0;
  }

  /** What a game shows of an entity: its look, 0 for none. */
  lookOf(id: number): number {
    return this.looks.get(id) ?? 0;
  }

  /** Every cell the game shows, in the areas held. */
  gameCells(): { x: number; y: number; code: number }[] {
    const cells: { x: number; y: number; code: number }[] = [];
    for (const codes of this.codes.values()) {
      for (const [key, code] of codes) cells.push({ x: key % 65536, y: Math.floor(key / 65536), code });
    }
    return cells;
  }

  /** The viewport left an area: what only it reported is gone (its ground is kept: it does not come again). */
  closeArea(area: number): void {
    const mirror = this.areas.get(area);
    this.areas.delete(area);
    this.pendingNames.delete(area);
    this.codes.delete(area);
    if (mirror) for (const id of mirror.keys()) this.release(area, id);
  }

  /** Drops every area, and the names, as after a `resync` (the server sends them all again). */
  forgetAreas(): void {
    this.areas.clear();
    this.where.clear();
    this.entities.clear();
    this.labels.clear();
    this.pendingNames.clear();
    this.codes.clear();
    this.looks.clear();
    this.ground.clear();
  }

  /**
   * An outcome carries the player's cell after the move, whatever the result.
   * It, not the own entity's place in an area, moves the avatar: an area's
   * delta built before the move can arrive after its outcome.
   */
  applyOutcome(outcome: Outcome): void {
    this.x = outcome.x;
    this.y = outcome.y;
  }

  /** The entities in the square viewport around the player (its own included), as a list. */
  inView(): Entity[] {
    const seen: Entity[] = [];
    for (const entity of this.entities.values()) {
      if (Math.abs(entity.x - this.x) <= this.viewRadius && Math.abs(entity.y - this.y) <= this.viewRadius) {
        seen.push(entity);
      }
    }
    return seen;
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

  // An area let go of an entity: forget it unless another area has reported it since.
  private release(area: number, id: number): void {
    if (this.where.get(id) === area) {
      this.where.delete(id);
      this.entities.delete(id);
      this.labels.delete(id);
      this.looks.delete(id);
    }
  }
}

// Coordinates are u16 on the wire.
const cellKey = (x: number, y: number): number => y * 65536 + x;
