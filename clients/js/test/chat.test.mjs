// Chat through GroveClient against a real server (scripts/test-server):
// say and its answer, the lines of players in view as `chat` events (one
// client in binary, one in JSON), mute and unmute, refusals with their
// reasons, and the operator's announcements.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { GroveClient } from "../dist/index.js";
import { skipReason, startServer } from "../../../assets/test/support/server.mjs";

const ADMIN_TOKEN = "chat-test-admin-token-19ab";

/** Resolves with the first `chat` line `client` hears that `pred` accepts; every line heard goes to `heard`. */
function hear(client, pred, heard = []) {
  return new Promise((resolve) => {
    const off = client.on("chat", (line) => {
      heard.push(line);
      if (pred(line)) {
        off();
        resolve(line);
      }
    });
  });
}

describe("chat through the client library", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  const clients = [];

  before(async () => {
    // A world smaller than a viewport of radius 16: everyone sees everyone.
    server = await startServer({
      port: 0,
      actors: 0,
      width: 16,
      height: 16,
      env: { GROVE_ADMIN_TOKEN: ADMIN_TOKEN },
    });
  });

  after(async () => {
    for (const client of clients) client.close();
    await server?.stop();
  });

  const join = async (name, encoding) => {
    const client = new GroveClient({ url: server.url, name, encoding, viewRadius: 16, WebSocket, reconnect: false });
    clients.push(client);
    return { client, welcome: await client.connect() };
  };

  test("a line reaches the players in view; a muted player's does not; refusals say why", async () => {
    const { client: ada, welcome: adaWelcome } = await join("Ada", "binary");
    const { client: bo, welcome: boWelcome } = await join("Bo", "json");

    // Ada's line, heard by Bo (with her name) and by Ada herself.
    const boHears = hear(bo, (line) => line.text === "hello Bo");
    const adaHears = hear(ada, (line) => line.text === "hello Bo");
    const said = await ada.say("  hello   Bo ");
    assert.deepEqual(said, { type: "said", seq: said.seq, result: "ok", reason: "" });
    const line = await boHears;
    assert.equal(line.id, adaWelcome.id);
    assert.equal(line.self, false);
    assert.equal(line.name, "Ada");
    assert.equal((await adaHears).self, true);

    // Muted: Ada's next line never reaches Bo's listeners. Bo's own line,
    // said after hers was answered, comes in the same delta or a later one:
    // by the time Bo hears it, Ada's would have been heard.
    bo.mute(adaWelcome.id);
    assert.ok(bo.isMuted(adaWelcome.id));
    const events = [];
    bo.on("event", (event) => events.push(event));
    const heard = [];
    const marker = hear(bo, (line) => line.text === "marker", heard);
    assert.equal((await ada.say("you cannot hear me")).result, "ok");
    assert.equal((await bo.say("marker")).result, "ok");
    await marker;
    assert.deepEqual(
      heard.map((line) => line.text),
      ["marker"],
    );
    assert.ok(!events.some((event) => event.data.text === "you cannot hear me"));

    bo.unmute(adaWelcome.id);
    assert.deepEqual(bo.mutedIds(), []);
    const again = hear(bo, (line) => line.text === "and now?");
    assert.equal((await ada.say("and now?")).result, "ok");
    assert.equal((await again).id, adaWelcome.id);

    // Refusals, with the reason in words.
    const empty = await bo.say("   ");
    assert.equal(empty.result, "empty");
    assert.match(empty.reason, /at least one character/);
    const long = await bo.say("x".repeat(201));
    assert.equal(long.result, "too_long");
    assert.match(long.reason, /at most 200 characters/);
    assert.ok(boWelcome.id > 0);
  });

  test("an announcement reaches every client", async () => {
    const { client: cy } = await join("Cy", "binary");
    const { client: di } = await join("Di", "json");
    const heard = Promise.all([cy.once("announcement"), di.once("announcement")]);

    const response = await fetch(new URL("/api/admin/announce", server.url), {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "Welcome to the grove" }),
    });
    assert.equal(response.status, 202);

    for (const announcement of await heard) assert.equal(announcement.text, "Welcome to the grove");
  });
});
