// Connection's reconnect timing against a stand-in WebSocket, on node:test's
// mocked clock: a socket that closed before it opened (a server that
// refused the upgrade, which a browser cannot see) is tried again no sooner
// than a second later; one that was open is tried again sooner.
import assert from "node:assert/strict";
import { mock, test } from "node:test";
import { Connection } from "../dist/index.js";

/** Sockets that never connect by themselves; the test opens and closes them. */
function standIn() {
  const sockets = [];
  class StandInSocket {
    constructor(url) {
      this.url = url;
      this.binaryType = "blob";
      this.readyState = 0;
      this.onopen = this.onmessage = this.onclose = this.onerror = null;
      sockets.push(this);
    }
    send() {}
    close() {
      this.readyState = 3;
    }
  }
  return { sockets, WebSocket: StandInSocket };
}

/** Lets the connection's open() past its awaited token. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A connection started on the mocked clock against stand-in sockets, once
 * its open() has made the first: the sockets, for the test to open and close.
 */
async function started(t) {
  mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
  t.after(() => mock.timers.reset());
  const { sockets, WebSocket } = standIn();
  const connection = new Connection({ url: "ws://grove/ws", encoding: "json", WebSocket, onMessage() {} });
  t.after(() => connection.stop());
  connection.start();
  await settle();
  return sockets;
}

/** Moves the mocked clock on by `ms`, and lets what it woke run. */
async function tick(ms) {
  mock.timers.tick(ms);
  await settle();
}

test("a socket closed before it opened is tried again a second later at the soonest", async (t) => {
  const sockets = await started(t);
  assert.equal(sockets.length, 1);

  sockets[0].onclose({});
  await tick(999);
  assert.equal(sockets.length, 1, "tried again within the second");

  await tick(401);
  assert.equal(sockets.length, 2);
});

test("a socket lost after it opened is tried again within the second", async (t) => {
  const sockets = await started(t);

  sockets[0].readyState = 1;
  sockets[0].onopen({});
  sockets[0].onclose({});
  await tick(300);
  assert.equal(sockets.length, 2);
});
