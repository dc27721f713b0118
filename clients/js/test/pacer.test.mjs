// The pacer that keeps a player under the server's rate limit.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MovePacer } from "../dist/index.js";

describe("MovePacer", () => {
  test("allows a burst, then makes the next move wait", () => {
    const pacer = new MovePacer(3, 1000);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), false);
    const wait = pacer.wait();
    assert.ok(wait > 900 && wait <= 1000, `waits ${wait} ms`);
  });

  test("by default stays under the server's 20 moves a second, bursts of 10", () => {
    const pacer = new MovePacer();
    let burst = 0;
    while (pacer.take()) burst++;
    assert.ok(burst <= 10, `a burst of ${burst}`);
    assert.ok(pacer.wait() >= 50, "at most 20 a second after it");
  });
});
