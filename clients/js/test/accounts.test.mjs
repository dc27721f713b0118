// deviceLogin against a stand-in server that turns logins away before it
// takes one: the client waits out each Retry-After, with jitter, and gives
// up after its retries.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";
import { LoginRefused, backoffMs, deviceLogin } from "../dist/index.js";

/** A server that answers the first `refusals` logins 503 with Retry-After: 1. */
async function refusingServer(refusals) {
  const arrivals = [];
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      arrivals.push({ at: Date.now(), device: JSON.parse(body).device_id });
      response.setHeader("content-type", "application/json");
      if (arrivals.length <= refusals) {
        response.writeHead(503, { "retry-after": "1" });
        response.end(JSON.stringify({ error: "unavailable", message: "busy" }));
      } else {
        response.writeHead(201);
        response.end(JSON.stringify({ token: "v1.t", account: { id: 7 }, created: true }));
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, arrivals, url: `http://127.0.0.1:${server.address().port}/` };
}

test("a refused login is tried again after Retry-After plus jitter, then logs in", async () => {
  const { server, arrivals, url } = await refusingServer(2);
  try {
    const login = await deviceLogin(url, "device-0001", { random: () => 0 });
    assert.deepEqual(login, { token: "v1.t", accountId: 7, created: true });
    assert.equal(arrivals.length, 3);
    assert.ok(arrivals.every((a) => a.device === "device-0001"));
    // Never sooner than the server asked.
    for (let i = 1; i < arrivals.length; i++) assert.ok(arrivals[i].at - arrivals[i - 1].at >= 1000);
  } finally {
    server.close();
  }
});

test("past its retries, the refusal is the answer", async () => {
  const { server, arrivals, url } = await refusingServer(10);
  try {
    await assert.rejects(deviceLogin(url, "device-0002", { retries: 0 }), (error) => {
      assert.ok(error instanceof LoginRefused);
      assert.equal(error.status, 503);
      assert.equal(error.code, "unavailable");
      return true;
    });
    assert.equal(arrivals.length, 1);
  } finally {
    server.close();
  }
});

test("the wait is the Retry-After plus up to as much again", () => {
  assert.equal(backoffMs("2", () => 0), 2000);
  assert.equal(backoffMs("2", () => 0.999), 3998);
  assert.equal(backoffMs(null, () => 0.5), 1500);
  assert.equal(backoffMs("Wed, 21 Oct 2015 07:28:00 GMT", () => 0), 1000);
});
