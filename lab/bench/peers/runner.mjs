// One load runner for Grove and for its Colyseus peer (bench/peers/colyseus),
// so that both servers are driven by the same players and measured by the
// same code: `mix grove.bench.peers` runs it once against each.
//
// Every player joins, learns its entity and cell, then moves once every
// --move-every ms (a tenth either way, its first move at a random point of
// the first interval) in a random direction of eight, with one move in
// flight at most, and counts the views it receives. Only the client side
// differs:
//
//   * grove: Grove's WebSocket protocol (docs/protocol.md), version 7, or
//     2, 3, 4, 5 or 6 (--protocol), in JSON or binary (--encoding), over a plain TCP socket with the few
//     lines of RFC 6455 a client needs, so that it runs without any npm
//     package (the test suite uses it);
//   * colyseus: the official client, @colyseus/sdk, from
//     bench/peers/colyseus/node_modules (install: see docs/benchmarks.md).
//
// Every outcome is checked, the same way for both: it answers the move in
// flight (`unexpected_outcome`), the cell it gives follows from where the
// player stood and the direction (`position`), and it agrees with the
// world's terrain, read from the file `mix grove.export.terrain` wrote
// (`rules`: `ok` onto a free ground, `blocked` against a tree, rock or
// water, `out_of_bounds` past the edge). Against Grove the runner also
// checks that the server's `GET /terrain` is that very file.
//
// Stages as in `mix grove.load ws --stages`: the server alone for
// --baseline-seconds, then for each count of players: ramp (--ramp a
// second), settle, measure for --stage-seconds (and, with
// --stage-outcomes N, until N outcomes were counted), stop after the first
// stage that fails (p99 > --limit-ms, or any error: a failed connect, a
// timeout, a disconnect, an error from the server). The server's CPU comes
// from /proc/PID/stat and its memory from /proc/PID/status (VmRSS), for
// both servers alike. A progress line every 5 s; the report as JSON
// (--json FILE) and a table on stdout.

import net from "node:net";
import http from "node:http";
import { readFileSync, writeFileSync } from "node:fs";
import { execSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------- options

const defaults = {
  server: "grove",
  url: "http://127.0.0.1:4000",
  terrain: null,
  stages: "100,200",
  "stage-seconds": 20,
  "stage-outcomes": 0,
  settle: 5,
  "baseline-seconds": 10,
  ramp: 500,
  "move-every": 1000,
  "limit-ms": 100,
  "timeout-ms": 5000,
  "server-pid": null,
  encoding: "json",
  minimap: "on",
  protocol: 7,
  every: 5,
  json: null,
  sample: null,
};

function parseArgs(argv) {
  const opts = { ...defaults };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in defaults) || argv[i + 1] === undefined) fail(`unknown or incomplete option ${argv[i]}`);
    opts[key] = typeof defaults[key] === "number" ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!["grove", "colyseus"].includes(opts.server)) fail("--server is grove or colyseus");
  if (!["json", "binary"].includes(opts.encoding)) fail("--encoding is json or binary");
  if (!["on", "off"].includes(opts.minimap)) fail("--minimap is on or off");
  if (![2, 3, 4, 5, 6, 7].includes(opts.protocol)) fail("--protocol is 2, 3, 4, 5, 6 or 7");
  if (!opts.terrain) fail("--terrain FILE is needed (mix grove.export.terrain)");
  opts.stages = String(opts.stages).split(",").map(Number);
  return opts;
}

function fail(message) {
  console.error(`runner: ${message}`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const out = (line) => console.log(line);

// ---------------------------------------------------------------- the world

function readTerrain(file) {
  const data = readFileSync(file);
  const eol = data.indexOf(10);
  const [magic, version, width, height] = data.subarray(0, eol).toString().split(" ");
  if (magic !== "grove-terrain" || version !== "1") fail(`${file} is not a Grove terrain file`);
  return { width: Number(width), height: Number(height), cells: data.subarray(eol + 1) };
}

const terrain = readTerrain(opts.terrain);
const STEPS = {
  n: [0, -1], ne: [1, -1], e: [1, 0], se: [1, 1],
  s: [0, 1], sw: [-1, 1], w: [-1, 0], nw: [-1, -1],
};
const DIRECTIONS = Object.keys(STEPS); // in the protocol's order

// A `uvar` at offset (seven bits a byte, least significant first): [value, next offset].
function uvar(bytes, offset) {
  let value = 0;
  let scale = 1;
  for (;;) {
    const byte = bytes[offset++];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, offset];
    scale *= 128;
  }
}

// How many areas a JSON `areas` message carries: its parts are arrays
// `[area, full, entities, gone]`, so a part is where the nesting comes
// back to the depth of the list of parts.
function areaCount(payload) {
  let depth = 0;
  let count = 0;
  for (let i = 0; i < payload.length; i++) {
    const c = payload[i];
    if (c === 0x5b /* [ */) { if (++depth === 2) count++; }
    else if (c === 0x5d /* ] */) depth--;
  }
  return count;
}
// The same from version 5 on, where a server's message is an array `[82,
// [area, entities, ..., area, entities, ...]]`: a part starts with the
// number of its area, in the list at the second depth (an entity's
// negative id, in version 6, is at the third).
// From version 7 on the parts follow the tag in the message's own array
// (`[82, area, entities, ...]`): a part starts with a number at the
// first depth after a comma.
function partCount(payload) {
  const at = opts.protocol >= 7 ? 1 : 2;
  let depth = 0;
  let count = 0;
  for (let i = 0; i < payload.length; i++) {
    const c = payload[i];
    if (c === 0x5b /* [ */) depth++;
    else if (c === 0x5d /* ] */) depth--;
    else if (depth === at && c >= 0x30 && c <= 0x39 && (payload[i - 1] === 0x5b || payload[i - 1] === 0x2c)) {
      if (at === 2 || payload[i - 1] === 0x2c) count++;
    }
  }
  return count;
}

// A version 5 JSON message's tag: the number after its opening bracket.
function tagOf(payload) {
  let tag = 0;
  for (let i = 1; i < payload.length && payload[i] >= 0x30 && payload[i] <= 0x39; i++) tag = tag * 10 + payload[i] - 0x30;
  return tag;
}

// An outcome's result by its binary code (docs/protocol.md, "result").
const RESULTS = ["ok", "out_of_bounds", "blocked", "occupied", "rate_limited", "busy", "not_owner", "unknown_entity", "interrupted"];
const inBounds = (x, y) => x >= 0 && y >= 0 && x < terrain.width && y < terrain.height;
const blocking = (x, y) => {
  const ground = terrain.cells[y * terrain.width + x];
  return ground === 1 || ground === 2 || ground === 3;
};

// ---------------------------------------------------------------- counting

const counts = {
  started: 0, connected: 0, connect_failures: 0, joined: 0, moves_sent: 0, moves_skipped: 0,
  // Upgrades refused with a Retry-After and tried again after it, and the
  // players waiting now to try again (neither connected nor failed).
  connect_retries: 0, connect_pending: 0,
  // views: areas (one per `area`, one per part of an `areas`); view_frames:
  // the frames that carried them.
  outcomes: 0, outcomes_ok: 0, views: 0, view_frames: 0, timeouts: 0, protocol_errors: 0, disconnects: 0,
  failures: 0,
  // Grove's bytes in by what they carry (frame headers included): the
  // views (areas, their ground, names and closings) and the broadcasts
  // every player gets alike (stats, and the minimap: density, colonies,
  // places, also counted apart); the rest are replies (outcomes, welcome).
  bytes_views: 0, bytes_broadcasts: 0, bytes_minimap: 0,
};
const failures = { unexpected_outcome: 0, position: 0, rules: 0 };
let latencies = []; // ms, of the outcomes since the last take
const bots = new Set();

// A JSON message's payload parsed, or undefined (counted as a protocol
// error) when it does not parse.
function parsed(payload) {
  try {
    return JSON.parse(payload.toString());
  } catch {
    counts.protocol_errors++;
    return undefined;
  }
}

function failure(kind) {
  failures[kind]++;
  counts.failures++;
}

function takeLatencies() {
  const taken = latencies;
  latencies = [];
  return taken.sort((a, b) => a - b);
}

const percentile = (sorted, p) =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

// ---------------------------------------------------------------- a player

// What a player knows and checks, whichever the server. `send(seq, dir)`
// puts a move on the wire.
class Player {
  constructor() {
    this.joined = false;
    this.cell = null;
    this.seq = 0;
    this.pending = null; // { seq, sentAt, dir, from }
    this.expired = [];
    this.closed = false;
  }

  welcome(x, y) {
    if (this.joined) return;
    this.joined = true;
    this.cell = [x, y];
    counts.joined++;
    this.scheduleFirst();
  }

  scheduleFirst() {
    this.timer = setTimeout(() => this.tick(), Math.random() * opts["move-every"]);
  }

  tick() {
    if (this.closed) return;
    const every = opts["move-every"];
    this.timer = setTimeout(() => this.tick(), every * 0.9 + Math.random() * every * 0.2);
    const now = performance.now();
    if (this.pending && now - this.pending.sentAt > opts["timeout-ms"]) {
      counts.timeouts++;
      this.expired = [this.pending.seq, ...this.expired].slice(0, 8);
      this.pending = null;
      this.cell = null; // unsure where it stands until an outcome says
    }
    if (this.pending) {
      counts.moves_skipped++;
      return;
    }
    const dir = DIRECTIONS[(Math.random() * 8) | 0];
    const seq = ++this.seq;
    this.pending = { seq, sentAt: now, dir, from: this.cell };
    counts.moves_sent++;
    this.send(seq, dir);
  }

  outcome(seq, result, x, y) {
    const pending = this.pending;
    if (!pending || pending.seq !== seq) {
      if (this.expired.includes(seq)) this.cell = [x, y];
      else failure("unexpected_outcome");
      return;
    }
    latencies.push(performance.now() - pending.sentAt);
    counts.outcomes++;
    this.pending = null;
    const from = pending.from;
    if (from) {
      const [dx, dy] = STEPS[pending.dir];
      const tx = from[0] + dx, ty = from[1] + dy;
      if (result === "ok") {
        counts.outcomes_ok++;
        if (x !== tx || y !== ty) failure("position");
        else if (!inBounds(tx, ty) || blocking(tx, ty)) failure("rules");
      } else {
        if (x !== from[0] || y !== from[1]) failure("position");
        if (result === "out_of_bounds" && inBounds(tx, ty)) failure("rules");
        if (result === "blocked" && !(inBounds(tx, ty) && blocking(tx, ty))) failure("rules");
        if (result === "occupied" && !(inBounds(tx, ty) && !blocking(tx, ty))) failure("rules");
      }
    } else if (result === "ok") {
      counts.outcomes_ok++;
    }
    this.cell = [x, y];
  }

  lost() {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    bots.delete(this);
    if (stopping) return;
    if (this.joined) counts.disconnects++;
    else counts.connect_failures++;
  }

  stop() {
    this.closed = true;
    clearTimeout(this.timer);
  }
}

// ---------------------------------------------------------------- Grove

// How many times a player's upgrade refused with a Retry-After is tried again.
const RETRIES = 3;

// A WebSocket client in a few lines: the handshake, masked frames out,
// unmasked and unfragmented frames in (all Grove's server sends).
class GrovePlayer extends Player {
  constructor(host, port) {
    super();
    // With --sample FILE, every frame one player in 20 reads while a stage
    // is measured is written there: what the bytes are made of.
    this.sampled = opts.sample !== null && counts.started % 20 === 1;
    this.tries = 0;
    this.backoff = null;
    this.open(host, port);
  }

  // A refusal that says when to come back (a server too busy to start a
  // player in time answers 503 with a Retry-After) is tried again after it
  // (30 s at most), with a jitter of up to as much again, up to
  // RETRIES times; the player fails to connect only once they run out.
  open(host, port) {
    this.buffer = null;
    this.upgraded = false;
    this.socket = net.connect(port, host);
    this.socket.setNoDelay(true);
    this.socket.on("connect", () => {
      const key = Buffer.from(String(Math.random())).toString("base64");
      this.socket.write(
        `GET /ws?encoding=${opts.encoding} HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    this.socket.on("data", (data) => this.read(data));
    this.socket.on("error", () => {});
    this.socket.on("close", () => {
      if (this.backoff === null) return this.lost();
      const wait = this.backoff;
      this.backoff = null;
      counts.connect_pending++;
      this.timer = setTimeout(() => {
        counts.connect_pending--;
        if (!this.closed) this.open(host, port);
      }, wait);
    });
  }

  read(data) {
    let buffer = this.buffer ? Buffer.concat([this.buffer, data]) : data;
    if (!this.upgraded) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return void (this.buffer = buffer);
      const head = buffer.subarray(0, end).toString();
      if (!head.startsWith("HTTP/1.1 101")) {
        const retryAfter = head.startsWith("HTTP/1.1 503") && /\r\nretry-after: *(\d+)/i.exec(head);
        if (retryAfter && this.tries < RETRIES && !stopping) {
          this.tries++;
          counts.connect_retries++;
          const ms = Math.min(Math.max(Number(retryAfter[1]), 1), 30) * 1000;
          this.backoff = ms + Math.random() * ms;
        }
        this.socket.destroy();
        return;
      }
      this.upgraded = true;
      counts.connected++;
      // With --minimap off, the join says `minimap` false (after an empty name and token).
      const off = opts.minimap === "off";
      const version = opts.protocol;
      if (opts.encoding === "binary") this.sendFrame(0x2, Buffer.from(off ? [5, version, 8, 0, 0, 0, 0, 0] : [5, version, 8]));
      else this.sendText(`{"type":"join","protocol":${version},"view_radius":8${off ? ',"minimap":false' : ""}}`);
      buffer = buffer.subarray(end + 4);
    }
    let offset = 0;
    while (buffer.length - offset >= 2) {
      const op = buffer[offset] & 0x0f;
      let length = buffer[offset + 1] & 0x7f;
      let start = offset + 2;
      if (length === 126) {
        if (buffer.length - offset < 4) break;
        length = buffer.readUInt16BE(offset + 2);
        start = offset + 4;
      } else if (length === 127) {
        if (buffer.length - offset < 10) break;
        length = Number(buffer.readBigUInt64BE(offset + 2));
        start = offset + 10;
      }
      if (buffer.length < start + length) break;
      const payload = buffer.subarray(start, start + length);
      const size = start + length - offset;
      offset = start + length;
      if (this.sampled && measuring) sampled.push(`${op} ${size} ${payload.toString("base64")}`);
      if (op === 1) this.message(payload, size);
      else if (op === 2) this.binary(payload, size);
      else if (op === 9) this.sendFrame(0xa, payload);
      else if (op === 8) this.socket.end();
    }
    this.buffer = offset < buffer.length ? Buffer.from(buffer.subarray(offset)) : null;
  }

  // From version 5 on, a message is an array, its tag first: the tag
  // tells the type without a parse; only what is checked is parsed.
  array(payload, size) {
    const tag = tagOf(payload);
    switch (tag) {
      case 72: counts.views++; counts.view_frames++; counts.bytes_views += size; return; // area
      case 82: counts.views += partCount(payload); counts.view_frames++; counts.bytes_views += size; return; // areas
      case 73: case 77: case 80: counts.bytes_views += size; return; // area_closed, names, ground
      case 70: case 74: case 81: counts.bytes_minimap += size; // density, colonies, places
      // falls through
      case 69: counts.bytes_broadcasts += size; return; // stats
      case 68: return; // pong
      case 65: case 64: case 67: break; // outcome, welcome, error: read below
      default: return;
    }
    const message = parsed(payload);
    if (message === undefined) return;
    // From version 7 on, an outcome's result is its code, as in binary.
    if (tag === 65) {
      const result = typeof message[2] === "number" ? RESULTS[message[2]] : message[2];
      return this.outcome(message[1], result, message[3], message[4]);
    }
    if (tag === 64) return this.welcome(message[3], message[4]); // protocol, id, x, y
    counts.protocol_errors++;
  }

  // The server writes `type` first: `{"type":"` is 9 bytes, and what
  // follows tells the type without a parse; only what is checked is parsed.
  message(payload, size) {
    if (payload[0] === 0x5b /* [ */) return this.array(payload, size);
    const c = payload[9];
    if (c === 0x61 /* a */) {
      if (payload[13] === 0x22 /* "area" */) { counts.views++; counts.view_frames++; }
      else if (payload[13] === 0x73 /* "areas" */) { counts.views += areaCount(payload); counts.view_frames++; }
      // area, areas, area_closed (announcement and acted do not come here)
      counts.bytes_views += size;
      return;
    }
    if (c === 0x67 /* ground */ || c === 0x6e /* names */) return void (counts.bytes_views += size);
    if (c === 0x64 /* density */ || c === 0x63 /* colonies */ || (c === 0x70 /* places or pong */ && payload[10] === 0x6c)) {
      counts.bytes_broadcasts += size;
      counts.bytes_minimap += size;
      return;
    }
    if (c === 0x73 /* stats */) return void (counts.bytes_broadcasts += size);
    if (c === 0x70 /* pong */) return;
    const message = parsed(payload);
    if (message === undefined) return;
    switch (message.type) {
      case "outcome": return this.outcome(message.seq, message.result, message.x, message.y);
      case "welcome": return this.welcome(message.x, message.y);
      case "error": counts.protocol_errors++; return;
      default: return;
    }
  }

  // The binary messages: a tag, then the fields (docs/protocol.md); in
  // version 2 ids are u32 and cells u16, from version 3 on both are uvar.
  binary(payload, size) {
    switch (payload[0]) {
      case 72: counts.views++; counts.view_frames++; counts.bytes_views += size; return; // area
      case 82: counts.views += uvar(payload, 1)[0]; counts.view_frames++; counts.bytes_views += size; return; // areas
      case 73: case 77: case 80: counts.bytes_views += size; return; // area_closed, names, ground
      case 70: case 74: case 81: counts.bytes_minimap += size; // density, colonies, places
      // falls through
      case 69: counts.bytes_broadcasts += size; return; // stats
      case 64: { // welcome: protocol, id, x, y
        if (opts.protocol === 2) return this.welcome(payload.readUInt16BE(6), payload.readUInt16BE(8));
        const [, afterId] = uvar(payload, 2);
        const [x, afterX] = uvar(payload, afterId);
        return this.welcome(x, uvar(payload, afterX)[0]);
      }
      case 65: { // outcome: seq, result, x, y
        if (opts.protocol === 2) {
          return this.outcome(payload.readUInt32BE(1), RESULTS[payload[5]], payload.readUInt16BE(6), payload.readUInt16BE(8));
        }
        const [x, afterX] = uvar(payload, 6);
        return this.outcome(payload.readUInt32BE(1), RESULTS[payload[5]], x, uvar(payload, afterX)[0]);
      }
      case 67: counts.protocol_errors++; return; // error
      default: return;
    }
  }

  send(seq, dir) {
    if (opts.encoding === "binary") {
      const move = Buffer.alloc(6);
      move[0] = 2;
      move.writeUInt32BE(seq, 1);
      move[5] = DIRECTIONS.indexOf(dir);
      this.sendFrame(0x2, move);
    } else {
      this.sendText(`{"type":"move","seq":${seq},"dir":"${dir}"}`);
    }
  }

  sendText(text) {
    this.sendFrame(0x1, Buffer.from(text));
  }

  sendFrame(op, payload) {
    if (this.socket.destroyed) return;
    const length = payload.length; // client messages are small: < 126 bytes
    const frame = Buffer.allocUnsafe(6 + length);
    frame[0] = 0x80 | op;
    frame[1] = 0x80 | length;
    const mask = (Math.random() * 0x100000000) >>> 0;
    frame.writeUInt32BE(mask, 2);
    for (let i = 0; i < length; i++) frame[6 + i] = payload[i] ^ ((mask >>> (8 * (3 - (i & 3)))) & 0xff);
    this.socket.write(frame);
  }

  bytes() {
    return { in: this.socket.bytesRead, out: this.socket.bytesWritten };
  }

  close() {
    this.stop();
    this.socket.destroy();
  }
}

// ---------------------------------------------------------------- Colyseus

let sdk = null;

function loadSdk() {
  const require = createRequire(path.join(here, "colyseus", "package.json"));
  try {
    return require("@colyseus/sdk");
  } catch {
    fail("the Colyseus packages are not installed: run `make bench-peers-setup` " +
      "(npm install --prefix bench/peers/colyseus --omit=optional --ignore-scripts)");
  }
}

class ColyseusPlayer extends Player {
  constructor(client) {
    super();
    this.room = null;
    this.socket = null;
    this.counted = { in: 0, out: 0 };
    client.join("grove").then(
      (room) => this.joinedRoom(room),
      () => this.lost(),
    );
  }

  joinedRoom(room) {
    this.room = room;
    counts.connected++;
    if (this.closed) return void room.leave();
    this.socket = room.connection?.transport?.ws?._socket ?? null;
    room.onMessage("welcome", (m) => this.welcome(m.x, m.y));
    room.onMessage("outcome", (m) => this.outcome(m.seq, m.result, m.x, m.y));
    room.onStateChange(() => counts.views++);
    room.onError(() => counts.protocol_errors++);
    room.onLeave(() => this.lost());
    room.send("hello");
  }

  send(seq, dir) {
    this.room.send("move", { seq, dir });
  }

  // Read before the socket goes, so the totals never fall.
  bytes() {
    if (this.socket) this.counted = { in: this.socket.bytesRead, out: this.socket.bytesWritten };
    return this.counted;
  }

  close() {
    this.stop();
    if (this.room) this.room.leave().catch(() => {});
  }
}

// ---------------------------------------------------------------- /proc

const ticksPerSecond = (() => {
  try {
    return Number(execSync("getconf CLK_TCK").toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

function rssBytes(pid) {
  try {
    const match = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m);
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

const serverPid = opts["server-pid"];

function cpuNow() {
  return {
    server: serverPid ? cpuTicks(serverPid) : null,
    load: cpuTicks(process.pid),
    at: performance.now(),
  };
}

function cpuUsed(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const percent = (a, b) => (a == null || b == null ? null : round1(((b - a) / ticksPerSecond / seconds) * 100));
  return { server_percent: percent(before.server, after.server), load_percent: percent(before.load, after.load) };
}

const round1 = (n) => (n == null ? null : Math.round(n * 10) / 10);

// ---------------------------------------------------------------- the run

let stopping = false;
let measuring = false;
const sampled = [];
let closedBytes = { in: 0, out: 0 };
const started = performance.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const elapsed = () => Math.round((performance.now() - started) / 1000);
const url = new URL(opts.url);
const host = url.hostname;
const port = Number(url.port);
let colyseusClient = null;
let spawned = 0;

function totalBytes() {
  const sum = { in: closedBytes.in, out: closedBytes.out };
  for (const bot of bots) {
    const b = bot.bytes();
    sum.in += b.in;
    sum.out += b.out;
  }
  return sum;
}

function spawn() {
  counts.started++;
  spawned++;
  const bot = opts.server === "grove" ? new GrovePlayer(host, port) : new ColyseusPlayer(colyseusClient);
  bots.add(bot);
  const lost = bot.lost.bind(bot);
  bot.lost = () => {
    if (bots.has(bot)) {
      const b = bot.bytes();
      closedBytes.in += b.in;
      closedBytes.out += b.out;
    }
    lost();
  };
}

const playing = () => counts.joined - counts.disconnects;

function snapshot() {
  return { counts: { ...counts }, bytes: totalBytes(), cpu: cpuNow(), at: performance.now() };
}

// What happened between two snapshots, with the latencies taken since the first.
function window(before, after, sorted) {
  const seconds = (after.at - before.at) / 1000;
  const d = (key) => after.counts[key] - before.counts[key];
  const errors = d("connect_failures") + d("timeouts") + d("protocol_errors") + d("disconnects");
  return {
    t: elapsed(),
    players: playing(),
    moves_per_s: Math.round(d("outcomes") / seconds),
    skipped_per_s: Math.round(d("moves_skipped") / seconds),
    views_per_s: Math.round(d("views") / seconds),
    view_frames_per_s: Math.round(d("view_frames") / seconds),
    bytes_in_per_s: Math.round((after.bytes.in - before.bytes.in) / seconds),
    bytes_out_per_s: Math.round((after.bytes.out - before.bytes.out) / seconds),
    bytes_views_per_s: Math.round(d("bytes_views") / seconds),
    bytes_broadcasts_per_s: Math.round(d("bytes_broadcasts") / seconds),
    bytes_minimap_per_s: Math.round(d("bytes_minimap") / seconds),
    p50_ms: round1(percentile(sorted, 50)),
    p99_ms: round1(percentile(sorted, 99)),
    max_ms: round1(sorted.length ? sorted[sorted.length - 1] : null),
    outcomes: d("outcomes"),
    errors,
    correctness_failures: d("failures"),
    ...cpuUsed(before.cpu, after.cpu),
    server_rss: serverPid ? rssBytes(serverPid) : null,
  };
}

function progress(w) {
  out(
    `load ${pad(w.t, 5)} s  ${pad(w.players, 6)} players  ${pad(w.moves_per_s, 6)} moves/s  ` +
    `${pad(w.views_per_s, 7)} views/s  in ${Math.round(w.bytes_in_per_s / 1024)} KB/s  ` +
    `p50 ${fig(w.p50_ms)} ms  p99 ${fig(w.p99_ms)} ms  errors ${w.errors}  failures ${w.correctness_failures}  ` +
    `server ${fig(w.server_percent)} % ${mb(w.server_rss)} MB  load ${fig(w.load_percent)} %`,
  );
}

const pad = (v, n) => String(v).padStart(n);
const fig = (v) => (v == null ? "-" : String(v));
const mb = (v) => (v == null ? "-" : Math.round(v / 1e6));

const passed = (w) => w.p99_ms != null && w.p99_ms <= opts["limit-ms"] && w.errors === 0;

// Waits `ms`, printing a progress line every `every` seconds.
async function hold(ms, until = () => true) {
  const end = performance.now() + ms;
  let last = snapshot();
  let sorted = [];
  while (performance.now() < end || !until()) {
    await sleep(Math.min(100, Math.max(end - performance.now(), 10)));
    if (performance.now() - last.at >= opts.every * 1000) {
      const now = snapshot();
      const taken = takeLatencies();
      sorted = sorted.concat(taken);
      progress(window(last, now, taken));
      last = now;
    }
  }
  return sorted.concat(takeLatencies()).sort((a, b) => a - b);
}

async function rampTo(count) {
  const from = spawned;
  const start = performance.now();
  while (spawned < count) {
    const due = Math.min(count, from + Math.floor(((performance.now() - start) * opts.ramp) / 1000) + 1);
    while (spawned < due) spawn();
    await sleep(100);
  }
  const deadline = performance.now() + 15000;
  while (counts.joined + counts.connect_failures < count && performance.now() < deadline) await sleep(100);
}

async function checkGroveTerrain() {
  const body = await new Promise((resolve, reject) => {
    http.get({ host, port, path: "/terrain" }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks)));
      res.on("error", reject);
    }).on("error", reject);
  });
  if (!body.equals(terrain.cells)) fail("the server's GET /terrain is not the terrain file: not the same world");
  out(`runner: the server's terrain is the file's (${terrain.width} x ${terrain.height})`);
}

async function main() {
  if (opts.server === "colyseus") {
    sdk = loadSdk();
    colyseusClient = new sdk.Client(`http://${host}:${port}`);
  } else {
    await checkGroveTerrain();
  }
  out(
    `runner: ${opts.server} at ${opts.url}, stages of ${opts.stages.join(", ")} players at ${opts.ramp}/s, ` +
    `moves every ${opts["move-every"]} ms, server pid ${serverPid ?? "-"}`,
  );

  const report = { server: opts.server, stages: [], baseline: null, knee: null, windows: [] };
  if (opts["baseline-seconds"] > 0) {
    const before = cpuNow();
    await sleep(opts["baseline-seconds"] * 1000);
    const used = cpuUsed(before, cpuNow());
    report.baseline = { server_percent: used.server_percent, rss: serverPid ? rssBytes(serverPid) : null };
    out(`baseline: nobody connected for ${opts["baseline-seconds"]} s: server cpu ${fig(used.server_percent)} % of a core, ` +
      `memory ${mb(report.baseline.rss)} MB`);
  }

  for (const count of opts.stages) {
    await rampTo(count);
    await hold(opts.settle * 1000);
    takeLatencies();
    const before = snapshot();
    const wanted = counts.outcomes + opts["stage-outcomes"];
    measuring = true;
    const sorted = await hold(opts["stage-seconds"] * 1000, () => counts.outcomes >= wanted);
    measuring = false;
    const w = window(before, snapshot(), sorted);
    const base = report.baseline;
    const players = w.players;
    const perPlayer = (percent) => (percent == null || players <= 0 ? null : Math.round((percent / 100) * 1e6 / players));
    const stage = {
      players_wanted: count,
      ...w,
      in_per_player_s: players > 0 ? Math.round(w.bytes_in_per_s / players) : 0,
      out_per_player_s: players > 0 ? Math.round(w.bytes_out_per_s / players) : 0,
      views_in_per_player_s: players > 0 ? Math.round(w.bytes_views_per_s / players) : 0,
      view_frames_per_player_s: players > 0 ? Math.round((10 * w.view_frames_per_s) / players) / 10 : 0,
      broadcasts_in_per_player_s: players > 0 ? Math.round(w.bytes_broadcasts_per_s / players) : 0,
      minimap_in_per_player_s: players > 0 ? Math.round(w.bytes_minimap_per_s / players) : 0,
      server_us_per_player_s: perPlayer(base && w.server_percent != null ? w.server_percent - base.server_percent : null),
      server_us_per_player_s_gross: perPlayer(w.server_percent),
      memory_per_player: base && base.rss && w.server_rss && players > 0 ? Math.round((w.server_rss - base.rss) / players) : null,
      failures: { ...failures },
      passed: passed(w),
    };
    report.stages.push(stage);
    out(
      `stage ${pad(players, 6)} players  ${pad(w.moves_per_s, 6)} moves/s  p50 ${fig(w.p50_ms)} p99 ${fig(w.p99_ms)} ` +
      `max ${fig(w.max_ms)} ms  ${w.views_per_s} views/s (${stage.view_frames_per_player_s} frames/player/s)  in ${stage.in_per_player_s} ` +
      `(views ${stage.views_in_per_player_s}, broadcasts ${stage.broadcasts_in_per_player_s} of which minimap ` +
      `${stage.minimap_in_per_player_s}) out ${stage.out_per_player_s} B/player/s  ` +
      `server ${fig(w.server_percent)} % (${fig(stage.server_us_per_player_s)} us/player-s)  ` +
      `${stage.memory_per_player == null ? "-" : Math.round(stage.memory_per_player / 1024)} KB/player  ` +
      `load ${fig(w.load_percent)} %  errors ${w.errors}  failures ${w.correctness_failures} -> ` +
      (stage.passed ? "pass" : "past the knee"),
    );
    if (!stage.passed) break;
    report.knee = players;
  }

  stopping = true;
  for (const bot of bots) bot.close();
  report.counts = { ...counts };
  report.failures = { ...failures };
  out(`knee ${report.knee ?? "none"} players; ${counts.outcomes} outcomes checked, failures ${JSON.stringify(failures)}`);
  if (opts.json) writeFileSync(opts.json, JSON.stringify(report, null, 1));
  if (opts.sample) writeFileSync(opts.sample, sampled.join("\n") + "\n");
  await sleep(200);
  process.exit(0);
}

main().catch((error) => {
  console.error(`runner: ${error.stack || error}`);
  process.exit(1);
});
