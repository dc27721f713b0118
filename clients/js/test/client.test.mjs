// GroveClient against a real server (scripts/test-server), from Node: it
// joins, walks, keeps the viewport, comes back after a restart with every
// area again; and against a stand-in server that misbehaves on purpose.
import assert from "node:assert/strict";
import { connect, createServer } from "node:net";
import { after, before, describe, test } from "node:test";
import WebSocket, { WebSocketServer } from "ws";
import { ConnectionLost, GroveClient, encode, socketUrl } from "../dist/index.js";
import { skipReason, startServer } from "../../../assets/test/support/server.mjs";

/**
 * A client closed when its test ends, passed or failed: one left open after
 * a failed assertion reconnects for ever and keeps the test file running.
 */
function clientFor(t, options) {
  const client = new GroveClient({ WebSocket, ...options });
  t.after(() => client.close());
  return client;
}

/** Walks until a step succeeds, trying the directions in turn. */
async function stepSomewhere(client) {
  const results = [];
  for (const direction of ["e", "s", "w", "n", "ne", "sw", "se", "nw"]) {
    const outcome = await client.move(direction);
    if (outcome.result === "ok") return { direction, outcome };
    results.push(`${direction}: ${outcome.result}`);
  }
  throw new Error(`no step succeeded: ${results.join(", ")}`);
}

/** A direction from where the welcome put the player to a cell inside the world. */
function insideDirection({ x, y, width, height }) {
  const steps = { n: [0, -1], ne: [1, -1], e: [1, 0], se: [1, 1], s: [0, 1], sw: [-1, 1], w: [-1, 0], nw: [-1, -1] };
  const inside = Object.keys(steps).find((direction) => {
    const [dx, dy] = steps[direction];
    return x + dx >= 0 && x + dx < width && y + dy >= 0 && y + dy < height;
  });
  assert.ok(inside, `no cell of a ${width} by ${height} world next to ${x}, ${y}`);
  return inside;
}

/**
 * A TCP relay on a port of its own, kept for the whole test, that passes
 * each connection on to the server of the moment (`to(port)`): a server
 * started again takes whatever port is free then, where one started again
 * on the port it had could find it taken, and the client, which knows the
 * relay's address alone, comes back to it as to a server restarted in
 * place. A server that goes closes its connections through the relay, and
 * while none listens the relay closes each connection it accepts, as a
 * refused one.
 */
function startRelay(t, port) {
  let target = port;
  const open = new Set();
  const relay = createServer((socket) => {
    const upstream = connect(target, "127.0.0.1");
    const pair = [socket, upstream];
    for (const end of pair) {
      open.add(end);
      end.on("error", () => {});
      end.on("close", () => {
        open.delete(end);
        for (const other of pair) other.destroy();
      });
    }
    socket.pipe(upstream);
    upstream.pipe(socket);
  });
  t.after(() => {
    for (const end of open) end.destroy();
    relay.close();
  });
  return new Promise((resolve, reject) => {
    relay.once("error", reject);
    relay.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${relay.address().port}/`,
        to: (port) => {
          target = port;
        },
      }),
    );
  });
}

/** The port a started server listens on, from the address it printed. */
const portOf = (server) => Number(new URL(server.url).port);

test("socketUrl turns a page's address into its WebSocket's, with the encoding", () => {
  assert.equal(socketUrl("http://127.0.0.1:4000/", "binary"), "ws://127.0.0.1:4000/ws?encoding=binary");
  assert.equal(socketUrl("https://grove.example/play?x=1", "json"), "wss://grove.example/ws?x=1&encoding=json");
  assert.equal(socketUrl("ws://h:1/ws", "json"), "ws://h:1/ws?encoding=json");
});

describe("a client against a real server", { skip: skipReason, timeout: 300_000 }, () => {
  let server;

  before(async () => {
    // Port 0: the server takes a free one and prints it.
    server = await startServer({ port: 0, actors: 100, width: 100, height: 100 });
  });

  after(async () => {
    await server?.stop();
  });

  for (const encoding of ["binary", "json"]) {
    test(`joins, walks and sees its viewport (${encoding})`, async (t) => {
      const client = clientFor(t, { url: server.url, encoding, name: "tester" });
      const views = [];
      client.on("view", (view) => views.push(view));
      const welcome = await client.connect();
      assert.equal(client.state, "connected");
      assert.equal(welcome.width, 100);
      assert.equal(client.world.selfId, welcome.id);

      const { direction, outcome } = await stepSomewhere(client);
      assert.equal(outcome.result, "ok");
      assert.deepEqual([client.world.x, client.world.y], [outcome.x, outcome.y]);
      assert.ok(["e", "s", "w", "n", "ne", "sw", "se", "nw"].includes(direction));

      // The areas around it come as a viewport: its own entity among them, all within the radius.
      const view = views.length > 0 ? client.view() : await client.once("view");
      assert.equal(view.id, welcome.id);
      assert.ok(view.entities.some((entity) => entity.id === welcome.id));
      for (const entity of view.entities) {
        assert.ok(Math.abs(entity.x - view.x) <= view.radius && Math.abs(entity.y - view.y) <= view.radius);
      }
      client.close();
      assert.equal(client.state, "stopped");
    });
  }

  test("acts in the world's game (the orchard, make run's): one answer each, and the game's cells shown", async (t) => {
    // The widest viewport the server allows, so that it takes in some
    // hundreds of trees and meadow cells wherever the player starts: the
    // orchard lays a basket on one meadow cell in 250 and fruit on a
    // tree in four, whatever its pickers took since.
    const client = clientFor(t, { url: server.url, encoding: "binary", viewRadius: 16 });
    const welcome = await client.connect();
    // The areas of the viewport come in one view or over several.
    let views = 0;
    while (!client.world.gameCells().some((cell) => cell.code === 1 || cell.code === 2) && views < 30) {
      await client.once("view");
      views += 1;
    }
    const shown = client.world.gameCells();
    assert.ok(
      shown.some((cell) => cell.code === 1 || cell.code === 2),
      `no tree that bears nor basket in ${views} views around ${client.world.x}, ${client.world.y}: ${JSON.stringify(shown)}`,
    );

    // Towards a cell of the world: a player that starts on its edge would
    // be answered out_of_bounds the other way, never the game's refusal.
    // It has not moved, so it is where it joined.
    const inside = insideDirection(welcome);
    const answer = await client.act("deliver", inside);
    assert.equal(answer.type, "acted");
    assert.equal(answer.result, "refused");
    assert.ok(["not_a_basket", "empty_hands"].includes(answer.reason), answer.reason);

    const unknown = await client.act("fly");
    assert.equal(unknown.result, "unknown_action");
    assert.match(unknown.reason, /no action "fly"/);

    const bad = await client.act("pick", "here", { count: 1 });
    assert.equal(bad.result, "bad_args");
    assert.match(bad.reason, /count: not an argument/);
  });

  test("after a server restart it joins again by itself and gets every area again", async (t) => {
    const relay = await startRelay(t, portOf(server));
    const client = clientFor(t, { url: relay.url });
    const states = [];
    client.on("state", (state) => states.push(state));
    await client.connect();
    await client.once("view");
    states.length = 0;

    await server.stop();
    const welcomedAgain = client.once("welcome");
    server = await startServer({ port: 0, actors: 100, width: 100, height: 100 });
    relay.to(portOf(server));
    const welcome = await welcomedAgain;
    assert.deepEqual(states.slice(0, 2), ["reconnecting", "connected"]);
    assert.equal(client.world.selfId, welcome.id);

    const view = await client.once("view");
    assert.ok(view.entities.some((entity) => entity.id === welcome.id), "the new session's areas came");
    await stepSomewhere(client);
  });

  test("a move asked for while not connected, or left unanswered by close, is rejected", async (t) => {
    const client = clientFor(t, { url: server.url });
    await assert.rejects(client.move("e"), ConnectionLost);
    await client.connect();
    const pending = client.move("e");
    client.close();
    await assert.rejects(pending, ConnectionLost);
    await assert.rejects(client.connect(), ConnectionLost);
  });
});

describe("a client against a stand-in server", () => {
  let stand;
  let url;

  before(async () => {
    stand = new WebSocketServer({ port: 0, host: "127.0.0.1" });
    await new Promise((resolve) => stand.once("listening", resolve));
    url = `http://127.0.0.1:${stand.address().port}/`;
  });

  after(() => new Promise((resolve) => stand.close(resolve)));

  const welcome = {
    type: "welcome",
    protocol: 2,
    id: 7,
    x: 5,
    y: 5,
    width: 20,
    height: 20,
    view_radius: 8,
    tick_ms: 100,
    view_ms: 1000,
    name: "",
    avatar: "🙂",
  };

  test("a frame it cannot read is reported, its areas forgotten, and a resync asked for", async (t) => {
    const received = [];
    let resynced;
    const resync = new Promise((resolve) => (resynced = resolve));
    stand.once("connection", (socket) => {
      socket.on("message", (data) => {
        received.push(JSON.parse(data.toString()));
        if (received.at(-1).type === "resync") resynced();
        if (received.length === 1) {
          socket.send(encode(welcome, "json"));
          socket.send(encode({ type: "area", area: 0, full: true, entities: [[7, 5, 5, 1], [8, 6, 5, 0]], gone: [] }, "json"));
          socket.send('{"type":"area","area":"zero"}');
        }
      });
    });
    const client = clientFor(t, { url, encoding: "json", name: "Ada" });
    const errors = [];
    client.on("error", (error) => errors.push(error));
    await client.connect();
    await resync;

    assert.equal(received[0].type, "join");
    assert.equal(received[0].name, "Ada", "the guest's name goes in the join");
    assert.deepEqual(errors.map((error) => error.code), ["bad_field"]);
    assert.equal(client.world.entities.size, 0, "the areas held were forgotten, to come again");
  });

  test("a move over the server's rate limit is answered like any other, rate_limited", async (t) => {
    stand.once("connection", (socket) => {
      socket.on("message", (data) => {
        const message = JSON.parse(data.toString());
        if (message.type === "join") socket.send(encode(welcome, "json"));
        if (message.type === "move") {
          const outcome = { type: "outcome", seq: message.seq, result: "rate_limited", x: welcome.x, y: welcome.y };
          socket.send(encode(outcome, "json"));
        }
      });
    });
    const client = clientFor(t, { url, encoding: "json" });
    await client.connect();
    const outcome = await client.move("e");
    assert.equal(outcome.result, "rate_limited");
  });
});
