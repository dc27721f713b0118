#!/usr/bin/env node
// A small stand-in for Grove's gateway, for working on the client without
// the Elixir server: it serves priv/static, GET /terrain, GET /kinds, GET /game (no game) and /ws, and plays
// docs/protocol.md well enough (join, move with the rate limit, ping,
// resync; welcome, areas at the tick (as snapshots only, which the protocol
// allows at any time), stats, density, bye on shutdown). Its actors are
// random walkers. It speaks scripts/test-server's interface, so the browser
// tests can run against it:
//
//   GROVE_TEST_SERVER=test/mock-server.mjs npm test
//
// Environment: GROVE_PORT (4000), GROVE_ACTORS (200), GROVE_WIDTH and
// GROVE_HEIGHT (100), GROVE_SEED (1), GROVE_TICK_MS (100).
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { WebSocketServer } from "ws";
import { importLibrary } from "./support/compile.mjs";

const { encode, decode, ProtocolError, directions } = await importLibrary();

const env = (name, fallback) => {
  const value = Number.parseInt(process.env[name] ?? "", 10);
  return Number.isNaN(value) ? fallback : value;
};
const port = env("GROVE_PORT", 4000);
const width = env("GROVE_WIDTH", 100);
const height = env("GROVE_HEIGHT", 100);
const actorCount = env("GROVE_ACTORS", 200);
const tickMs = env("GROVE_TICK_MS", 100);
const seed = env("GROVE_SEED", 1);
const densityBlock = 10;
const zoneSize = 20;
const zonesX = Math.ceil(width / zoneSize);
const staticDir = resolve(fileURLToPath(import.meta.url), "../../../priv/static");

// --- The world -------------------------------------------------------------

// A small deterministic generator (mulberry32), so a restarted mock has the same ground.
function random32(state) {
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const terrain = makeTerrain();
const blocking = new Set([1, 2, 3]);
const occupant = new Map(); // cell index -> entity id
const entities = new Map(); // id -> {id, x, y, kind}
const random = random32(seed * 7919);
let nextId = 1;
let movesThisSecond = 0;
let movesPerSecond = 0;

function makeTerrain() {
  const next = random32(seed);
  const cells = new Uint8Array(width * height);
  // A few round lakes and forests, scattered rocks and flowers.
  const blobs = [];
  const area = width * height;
  for (let i = 0; i < Math.max(2, area / 2500); i++) {
    blobs.push({ x: next() * width, y: next() * height, r: 2 + next() * 6, code: next() < 0.4 ? 3 : 1 });
  }
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let code = next() < 0.015 ? 2 : next() < 0.06 ? 4 : 0;
      for (const blob of blobs) {
        const d = Math.hypot(x - blob.x, y - blob.y);
        if (d < blob.r && (blob.code === 3 || next() < 0.55)) code = blob.code;
      }
      cells[y * width + x] = code;
    }
  }
  return cells;
}

const free = (x, y) =>
  x >= 0 && y >= 0 && x < width && y < height && !blocking.has(terrain[y * width + x]) && !occupant.has(y * width + x);

function place(kind) {
  for (let tries = 0; tries < 10_000; tries++) {
    const x = Math.floor(random() * width);
    const y = Math.floor(random() * height);
    if (free(x, y)) {
      const entity = { id: nextId++, x, y, kind };
      entities.set(entity.id, entity);
      occupant.set(y * width + x, entity.id);
      return entity;
    }
  }
  return undefined;
}

const steps = { n: [0, -1], ne: [1, -1], e: [1, 0], se: [1, 1], s: [0, 1], sw: [-1, 1], w: [-1, 0], nw: [-1, -1] };

function tryMove(entity, dir) {
  const [dx, dy] = steps[dir];
  const x = entity.x + dx;
  const y = entity.y + dy;
  if (x < 0 || y < 0 || x >= width || y >= height) return "out_of_bounds";
  if (blocking.has(terrain[y * width + x])) return "blocked";
  if (occupant.has(y * width + x)) return "occupied";
  occupant.delete(entity.y * width + entity.x);
  entity.x = x;
  entity.y = y;
  occupant.set(y * width + x, entity.id);
  movesThisSecond++;
  return "ok";
}

function remove(entity) {
  entities.delete(entity.id);
  occupant.delete(entity.y * width + entity.x);
}

const actors = [];
for (let i = 0; i < actorCount; i++) {
  const actor = place(0);
  if (actor) actors.push(actor);
}

// --- Sessions --------------------------------------------------------------

const sessions = new Set();

function send(session, message) {
  if (session.socket.readyState === session.socket.OPEN) session.socket.send(encode(message, session.encoding));
}

// The zones (areas) a viewport reaches, as the server numbers them.
function viewZones(session) {
  const { entity, radius } = session;
  const zones = new Set();
  const clamp = (v, max) => Math.min(Math.max(v, 0), max - 1);
  for (let y = clamp(entity.y - radius, height); y <= clamp(entity.y + radius, height); y++) {
    for (let x = clamp(entity.x - radius, width); x <= clamp(entity.x + radius, width); x++) {
      zones.add(Math.floor(y / zoneSize) * zonesX + Math.floor(x / zoneSize));
    }
  }
  return zones;
}

function zoneEntities(zone) {
  const x0 = (zone % zonesX) * zoneSize;
  const y0 = Math.floor(zone / zonesX) * zoneSize;
  const inside = [];
  for (const e of entities.values()) {
    if (e.x >= x0 && e.x < x0 + zoneSize && e.y >= y0 && e.y < y0 + zoneSize) inside.push([e.id, e.x, e.y, e.kind]);
  }
  return inside;
}

// An area's ground, sent once before its first snapshot.
function zoneGround(zone) {
  const x0 = (zone % zonesX) * zoneSize;
  const y0 = Math.floor(zone / zonesX) * zoneSize;
  const w = Math.min(zoneSize, width - x0);
  const h = Math.min(zoneSize, height - y0);
  const cells = new Uint8Array(w * h);
  for (let row = 0; row < h; row++) cells.set(terrain.subarray((y0 + row) * width + x0, (y0 + row) * width + x0 + w), row * w);
  return { type: "ground", area: zone, x: x0, y: y0, width: w, height: h, cells };
}

// Every area in view that changed (or that the session has not had) as a
// snapshot; every area it left, closed.
function sendAreas(session) {
  const zones = viewZones(session);
  for (const zone of session.sent.keys()) {
    if (!zones.has(zone)) {
      session.sent.delete(zone);
      send(session, { type: "area_closed", area: zone });
    }
  }
  for (const zone of zones) {
    const inside = zoneEntities(zone);
    const signature = JSON.stringify(inside);
    if (session.sent.get(zone) !== signature) {
      if (!session.sent.has(zone)) send(session, zoneGround(zone));
      session.sent.set(zone, signature);
      send(session, { type: "area", area: zone, full: true, entities: inside, gone: [] });
    }
  }
}

function handle(session, message) {
  switch (message.type) {
    case "join": {
      if (session.entity) return send(session, { type: "error", code: "already_joined", message: "joined already" });
      const entity = place(1);
      if (!entity) return send(session, { type: "error", code: "join_failed", message: "the world is full" });
      session.entity = entity;
      session.radius = Math.min(message.view_radius, 16);
      // The library's version: its JSON is what the library encodes.
      if (message.protocol !== 7) {
        send(session, { type: "error", code: "unsupported_protocol", message: "this server speaks protocol 7" });
        return session.socket.close(1002);
      }
      send(session, {
        type: "welcome",
        protocol: message.protocol,
        id: entity.id,
        x: entity.x,
        y: entity.y,
        width,
        height,
        view_radius: session.radius,
        tick_ms: tickMs,
        view_ms: tickMs,
        name: "",
        avatar: "😀",
      });
      return sendAreas(session);
    }
    case "move": {
      if (!session.entity) return send(session, { type: "error", code: "not_joined", message: "join first" });
      // The gateway's limit: 20 moves a second, bursts of 10.
      const now = performance.now();
      session.tokens = Math.min(10, session.tokens + ((now - session.refilledAt) * 20) / 1000);
      session.refilledAt = now;
      if (session.tokens < 1) {
        const { x, y } = session.entity;
        return send(session, { type: "outcome", seq: message.seq, result: "rate_limited", x, y });
      }
      session.tokens -= 1;
      const result = tryMove(session.entity, message.dir);
      return send(session, { type: "outcome", seq: message.seq, result, x: session.entity.x, y: session.entity.y });
    }
    // The mock has no bacteria: every seed is answered as a world without them answers it.
    case "seed":
      if (!session.entity) return send(session, { type: "error", code: "not_joined", message: "join first" });
      return send(session, { type: "seeded", seq: message.seq, result: "disabled" });
    case "ping":
      return send(session, { type: "pong", t: message.t });
    case "resync":
      if (!session.entity) return send(session, { type: "error", code: "not_joined", message: "join first" });
      session.sent.clear();
      return sendAreas(session);
    default:
      return send(session, { type: "error", code: "unknown_type", message: `${message.type} is for clients` });
  }
}

// --- The clock -------------------------------------------------------------

setInterval(() => {
  for (const actor of actors) {
    if (random() < 0.3) tryMove(actor, directions[Math.floor(random() * 8)]);
  }
  for (const session of sessions) if (session.entity) sendAreas(session);
}, tickMs);

setInterval(() => {
  movesPerSecond = movesThisSecond;
  movesThisSecond = 0;
  const players = [...sessions].filter((s) => s.entity).length;
  const stats = { type: "stats", players, actors: actors.length, entities: entities.size, moves_per_s: movesPerSecond };
  for (const session of sessions) if (session.entity) send(session, stats);
}, 1000);

setInterval(() => {
  const cols = Math.ceil(width / densityBlock);
  const rows = Math.ceil(height / densityBlock);
  const counts = new Uint32Array(cols * rows);
  for (const e of entities.values()) counts[Math.floor(e.y / densityBlock) * cols + Math.floor(e.x / densityBlock)]++;
  const capacity = densityBlock * densityBlock;
  const cells = Uint8Array.from(counts, (count) => Math.min(255, Math.ceil((count * 255) / capacity)));
  for (const session of sessions) if (session.entity) send(session, { type: "density", cols, rows, cells });
}, 2000);

// --- HTTP and WebSocket ----------------------------------------------------

const contentTypes = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
  ".woff2": "font/woff2",
};
const terrainGzip = gzipSync(terrain);

const server = createServer(async (request, response) => {
  const path = new URL(request.url ?? "/", "http://localhost").pathname;
  if (path === "/terrain") {
    const gzip = /\bgzip\b/.test(request.headers["accept-encoding"] ?? "");
    response.writeHead(200, {
      "content-type": "application/octet-stream",
      "x-grove-width": String(width),
      "x-grove-height": String(height),
      ...(gzip ? { "content-encoding": "gzip" } : {}),
    });
    return response.end(gzip ? terrainGzip : terrain);
  }
  // The legend of entity kinds: the mock's actors are plain ones (code 0).
  if (path === "/kinds") {
    response.writeHead(200, { "content-type": "application/json" });
    const kinds = [
      { code: 0, name: "actor", emoji: "" },
      { code: 1, name: "player", emoji: "" },
    ];
    return response.end(JSON.stringify({ kinds }));
  }
  // The mock runs no game.
  if (path === "/game") {
    response.writeHead(200, { "content-type": "application/json" });
    return response.end(JSON.stringify({ game: null }));
  }
  // Every device logs in; the mock has no accounts, so any token plays as a guest.
  if (path === "/api/device_login" && request.method === "POST") {
    response.writeHead(200, { "content-type": "application/json" });
    return response.end(JSON.stringify({ token: "mock-token", account: { id: 0, name: null } }));
  }
  const file = normalize(join(staticDir, path === "/" ? "index.html" : path));
  if (!file.startsWith(staticDir)) return response.writeHead(403).end();
  try {
    const body = await readFile(file);
    response.writeHead(200, { "content-type": contentTypes[extname(file)] ?? "application/octet-stream" });
    response.end(body);
  } catch {
    response.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  }
});

const sockets = new WebSocketServer({ noServer: true, maxPayload: 4096 });
server.on("upgrade", (request, socket, head) => {
  const url = new URL(request.url ?? "/", "http://localhost");
  if (url.pathname !== "/ws") return socket.destroy();
  sockets.handleUpgrade(request, socket, head, (ws) => {
    const session = {
      socket: ws,
      encoding: url.searchParams.get("encoding") === "binary" ? "binary" : "json",
      entity: undefined,
      radius: 8,
      sent: new Map(),
      tokens: 10,
      refilledAt: performance.now(),
    };
    sessions.add(session);
    ws.on("message", (data, isBinary) => {
      let message;
      try {
        message = decode(isBinary ? new Uint8Array(data) : data.toString("utf8"));
      } catch (error) {
        if (!(error instanceof ProtocolError)) throw error;
        return send(session, { type: "error", code: error.code, message: error.message });
      }
      handle(session, message);
    });
    ws.on("close", () => {
      sessions.delete(session);
      if (session.entity) remove(session.entity);
    });
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`grove: listening on http://127.0.0.1:${server.address().port} (mock, ${actors.length} actors, ${width} x ${height})`);
});

process.on("SIGTERM", () => {
  for (const session of sessions) {
    send(session, { type: "bye", reason: "shutdown", message: "the server is stopping" });
    session.socket.close(1001);
  }
  server.close();
  // Sockets that do not finish closing must not keep a stopped server alive.
  setTimeout(() => process.exit(0), 200).unref();
});
