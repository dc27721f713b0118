// The pacer that keeps a player under the server's rate limit.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MovePacer } from "../dist/index.js";

// A clock the test moves by hand: what the pacer answers depends on the
// time it is told, never on how fast this machine runs the test.
function clock() {
  let t = 1_000;
  const now = () => t;
  now.advance = (ms) => {
    t += ms;
  };
  return now;
}

describe("MovePacer", () => {
  test("allows a burst, then makes the next move wait", () => {
    const now = clock();
    const pacer = new MovePacer(3, 1000, now);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), false);
    assert.equal(pacer.wait(), 1000);
    now.advance(100);
    assert.equal(pacer.wait(), 900);
    now.advance(900);
    assert.equal(pacer.wait(), 0);
    assert.equal(pacer.take(), true);
    assert.equal(pacer.take(), false);
  });

  test("never holds more than its burst, however long it waits", () => {
    const now = clock();
    const pacer = new MovePacer(3, 1000, now);
    now.advance(60_000);
    let burst = 0;
    while (pacer.take()) burst++;
    assert.equal(burst, 3);
  });

  test("by default stays under the server's 20 moves a second, bursts of 10", () => {
    const now = clock();
    const pacer = new MovePacer(undefined, undefined, now);
    let burst = 0;
    while (pacer.take()) burst++;
    assert.ok(burst <= 10, `a burst of ${burst}`);
    assert.ok(pacer.wait() >= 50, "at most 20 a second after it");
    // Over a long while, no more than 20 a second get through.
    let taken = 0;
    for (let ms = 0; ms < 10_000; ms += 5) {
      now.advance(5);
      if (pacer.take()) taken++;
    }
    assert.ok(taken <= 200, `${taken} moves in 10 s`);
  });
});
