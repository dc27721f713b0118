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

function connectionFor(t, WebSocket) {
  const connection = new Connection({ url: "ws://grove/ws", encoding: "json", WebSocket, onMessage() {} });
  t.after(() => connection.stop());
  return connection;
}

test("a socket closed before it opened is tried again a second later at the soonest", async (t) => {
  mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
  t.after(() => mock.timers.reset());
  const { sockets, WebSocket } = standIn();
  const connection = connectionFor(t, WebSocket);
  connection.start();
  await settle();
  assert.equal(sockets.length, 1);

  sockets[0].onclose({});
  mock.timers.tick(999);
  await settle();
  assert.equal(sockets.length, 1, "tried again within the second");

  mock.timers.tick(401);
  await settle();
  assert.equal(sockets.length, 2);
});

test("a socket lost after it opened is tried again within the second", async (t) => {
  mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
  t.after(() => mock.timers.reset());
  const { sockets, WebSocket } = standIn();
  const connection = connectionFor(t, WebSocket);
  connection.start();
  await settle();

  sockets[0].readyState = 1;
  sockets[0].onopen({});
  sockets[0].onclose({});
  mock.timers.tick(300);
  await settle();
  assert.equal(sockets.length, 2);
});
