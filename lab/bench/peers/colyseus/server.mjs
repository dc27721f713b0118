// Grove's game written for Colyseus, the way its documentation teaches:
// one room whose state is a MapSchema of entities, per-client filtering with
// StateView (the entity map is tagged `.view()`, so a client receives only
// the entities its view holds), a simulation interval for the world's tick
// and a message handler for moves. It exists to measure Grove against the
// most used room-based server on the same world, rules and load (see
// docs/benchmarks.md, "Side by side with Colyseus").
//
// The same game as Grove's default world:
//
//   * the terrain is Grove's, read from the file `mix grove.export.terrain`
//     writes (same seed, same cells); trees, rocks and water block;
//   * one entity per cell, moves of one cell in eight directions, inside
//     the bounds; every move gets exactly one outcome at once:
//     `ok` with the new cell, or `out_of_bounds`, `blocked`, `occupied`
//     with the unchanged one;
//   * a 17 x 17 viewport (8 cells each way) per player, refreshed at the
//     tick (100 ms), which is also the patch rate;
//   * ACTORS (default 20,000) random walkers inside the room, each moving
//     once a second, a tenth of them at each tick.
//
// Usage: PORT=2567 TERRAIN=/path/terrain.bin ACTORS=20000 node server.mjs
// It prints `listening on PORT` once the room and its actors exist.

import { readFileSync } from "node:fs";
import { Room, defineServer, defineRoom, matchMaker } from "@colyseus/core";
import { WebSocketTransport } from "@colyseus/ws-transport";
import { schema, t, StateView } from "@colyseus/schema";

const PORT = Number(process.env.PORT || 2567);
const TERRAIN = process.env.TERRAIN;
const ACTORS = Number(process.env.ACTORS ?? 20000);
const TICK_MS = 100;
const VIEW_RADIUS = 8;

const DIRECTIONS = {
  n: [0, -1], ne: [1, -1], e: [1, 0], se: [1, 1],
  s: [0, 1], sw: [-1, 1], w: [-1, 0], nw: [-1, -1],
};
const DIRECTION_NAMES = Object.keys(DIRECTIONS);

// The file `mix grove.export.terrain` writes: a header line
// "grove-terrain 1 WIDTH HEIGHT SEED\n", then a byte per cell, row by row
// (0 meadow, 1 tree, 2 rock, 3 water, 4 flowers).
function readTerrain(path) {
  const data = readFileSync(path);
  const eol = data.indexOf(10);
  const [magic, version, width, height, seed] = data.subarray(0, eol).toString().split(" ");
  if (magic !== "grove-terrain" || version !== "1") throw new Error(`${path}: not a Grove terrain file`);
  const cells = data.subarray(eol + 1);
  if (cells.length !== Number(width) * Number(height)) throw new Error(`${path}: truncated`);
  return { width: Number(width), height: Number(height), seed, cells };
}

export const Entity = schema({
  x: t.uint16(),
  y: t.uint16(),
  kind: t.uint8(), // 0 an actor, 1 a player
}, "Entity");

export const WorldState = schema({
  // Tagged `.view()`: an entity reaches a client only once the client's
  // StateView holds it.
  entities: t.map(Entity).view(),
}, "WorldState");

class GroveRoom extends Room {
  maxClients = 100000;
  autoDispose = false;
  patchRate = TICK_MS;
  state = new WorldState();

  messages = {
    // The client asks once its handlers are in place (Grove's `join`).
    hello: (client) => {
      const player = this.players.get(client.sessionId);
      if (!player) return;
      const entity = this.state.entities.get(player.key);
      client.send("welcome", { id: player.id, x: entity.x, y: entity.y, width: this.terrain.width, height: this.terrain.height });
    },
    move: (client, message) => {
      const player = this.players.get(client.sessionId);
      if (!player || !message) return;
      const result = this.applyMove(player.id, message.dir);
      const entity = this.state.entities.get(player.key);
      client.send("outcome", { seq: message.seq, result, x: entity.x, y: entity.y });
    },
  };

  onCreate({ actors }) {
    // The terrain stays in this process (room options may be serialized).
    this.terrain = terrain;
    const { width, height } = terrain;
    // The occupant of each cell: 0 when free, else the entity's id.
    this.occupant = new Int32Array(width * height);
    this.positions = new Map(); // id -> Entity (the schema instance)
    this.players = new Map(); // sessionId -> { id, key, visible: Set }
    this.nextId = 1;
    this.actorIds = [];
    for (let i = 0; i < actors; i++) this.actorIds.push(this.spawn(0));
    this.slot = 0;
    this.setSimulationInterval(() => this.tick(), TICK_MS);
  }

  onJoin(client) {
    const id = this.spawn(1);
    const key = String(id);
    client.view = new StateView();
    const player = { id, key, client, visible: new Set() };
    this.players.set(client.sessionId, player);
    this.refreshView(player);
  }

  onLeave(client) {
    const player = this.players.get(client.sessionId);
    if (!player) return;
    this.players.delete(client.sessionId);
    this.remove(player.id);
  }

  // A tenth of the actors walk at each tick: each once a second.
  tick() {
    const ids = this.actorIds;
    for (let i = this.slot; i < ids.length; i += 10) {
      this.applyMove(ids[i], DIRECTION_NAMES[(Math.random() * 8) | 0]);
    }
    this.slot = (this.slot + 1) % 10;
    for (const player of this.players.values()) this.refreshView(player);
  }

  // The rules: in bounds, not onto blocking terrain, one entity per cell.
  applyMove(id, dir) {
    const step = DIRECTIONS[dir];
    const entity = this.positions.get(id);
    if (!step) return "bad_direction";
    const { width, height, cells } = this.terrain;
    const x = entity.x + step[0];
    const y = entity.y + step[1];
    if (x < 0 || y < 0 || x >= width || y >= height) return "out_of_bounds";
    const cell = y * width + x;
    const ground = cells[cell];
    if (ground === 1 || ground === 2 || ground === 3) return "blocked";
    if (this.occupant[cell] !== 0) return "occupied";
    this.occupant[entity.y * width + entity.x] = 0;
    this.occupant[cell] = id;
    entity.x = x;
    entity.y = y;
    return "ok";
  }

  // Makes the player's view hold exactly the entities in its 17 x 17 square.
  refreshView(player) {
    const { width, height } = this.terrain;
    const me = this.positions.get(player.id);
    const x0 = Math.max(me.x - VIEW_RADIUS, 0), x1 = Math.min(me.x + VIEW_RADIUS, width - 1);
    const y0 = Math.max(me.y - VIEW_RADIUS, 0), y1 = Math.min(me.y + VIEW_RADIUS, height - 1);
    const view = player.client.view;
    const now = new Set();
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        const id = this.occupant[y * width + x];
        if (id !== 0) {
          now.add(id);
          if (!player.visible.has(id)) view.add(this.positions.get(id));
        }
      }
    }
    for (const id of player.visible) {
      if (!now.has(id)) {
        const entity = this.positions.get(id);
        if (entity) view.remove(entity);
      }
    }
    player.visible = now;
  }

  spawn(kind) {
    const { width, height, cells } = this.terrain;
    for (;;) {
      const x = (Math.random() * width) | 0;
      const y = (Math.random() * height) | 0;
      const cell = y * width + x;
      const ground = cells[cell];
      if (ground === 1 || ground === 2 || ground === 3 || this.occupant[cell] !== 0) continue;
      const id = this.nextId++;
      const entity = new Entity();
      entity.x = x;
      entity.y = y;
      entity.kind = kind;
      this.occupant[cell] = id;
      this.positions.set(id, entity);
      this.state.entities.set(String(id), entity);
      return id;
    }
  }

  remove(id) {
    const entity = this.positions.get(id);
    if (!entity) return;
    this.occupant[entity.y * this.terrain.width + entity.x] = 0;
    this.positions.delete(id);
    this.state.entities.delete(String(id));
  }
}

if (!TERRAIN) {
  console.error("TERRAIN must name a file written by `mix grove.export.terrain`");
  process.exit(2);
}

const terrain = readTerrain(TERRAIN);
const server = defineServer({
  rooms: { grove: defineRoom(GroveRoom) },
  transport: new WebSocketTransport(),
  gracefullyShutdown: false,
});

// The room (and its actors) exist before the first player, so the server
// can be measured with nobody connected.
await server.listen(PORT, "127.0.0.1");
const room = await matchMaker.createRoom("grove", { terrain, actors: ACTORS });
console.log(`colyseus: room ${room.roomId} with ${ACTORS} actors on a ${terrain.width} x ${terrain.height} world (seed ${terrain.seed})`);
console.log(`listening on ${PORT}`);

process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
