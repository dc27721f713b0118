// The hint under the HUD, on a clock the test turns by hand: a refusal's
// hint fades after its time or goes with the next move that succeeds, a new
// hint starts the time again, and outcomes of older moves change nothing.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { importSource } from "./support/compile.mjs";

const { Hint } = await importSource("hint");

/** Timers that fire only when the test advances the clock. */
class ManualClock {
  now = 0;
  timers = new Map();
  nextHandle = 1;

  setTimeout(callback, ms) {
    const handle = this.nextHandle++;
    this.timers.set(handle, { at: this.now + ms, callback });
    return handle;
  }

  clearTimeout(handle) {
    this.timers.delete(handle);
  }

  advance(ms) {
    this.now += ms;
    for (const [handle, timer] of [...this.timers].sort((a, b) => a[1].at - b[1].at)) {
      if (timer.at > this.now || !this.timers.has(handle)) continue;
      this.timers.delete(handle);
      timer.callback();
    }
  }
}

const BLOCKED = "Something is in the way.";
const LIFETIME = 1000;

describe("Hint", () => {
  let clock;
  let shown;
  let hint;
  beforeEach(() => {
    clock = new ManualClock();
    shown = undefined;
    hint = new Hint((text) => (shown = text), clock, LIFETIME);
  });

  test("a refusal is shown, and fades after its time", () => {
    hint.settle(1, BLOCKED);
    assert.equal(shown, BLOCKED);
    clock.advance(LIFETIME - 1);
    assert.equal(shown, BLOCKED);
    clock.advance(1);
    assert.equal(shown, undefined);
    assert.equal(clock.timers.size, 0);
  });

  test("the next move that succeeds takes a refusal's hint away at once", () => {
    hint.settle(1, BLOCKED);
    hint.settle(2, undefined);
    assert.equal(shown, undefined);
    assert.equal(clock.timers.size, 0, "its timer went too");
  });

  test("a refusal while the hint is up starts its time again, with one timer", () => {
    hint.settle(1, BLOCKED);
    clock.advance(LIFETIME / 2);
    hint.settle(2, BLOCKED);
    assert.equal(clock.timers.size, 1);
    clock.advance(LIFETIME / 2);
    assert.equal(shown, BLOCKED, "the first refusal's time is not the second's");
    // Blocked, blocked, then a step: gone with the step, not with a timer.
    hint.settle(3, undefined);
    assert.equal(shown, undefined);
    assert.equal(clock.timers.size, 0);
  });

  test("a refusal answered after a later move's success shows nothing", () => {
    hint.settle(2, undefined);
    hint.settle(1, BLOCKED);
    assert.equal(shown, undefined);
    assert.equal(clock.timers.size, 0);
  });

  test("a success answered after a later move's refusal leaves the refusal up", () => {
    hint.settle(2, BLOCKED);
    hint.settle(1, undefined);
    assert.equal(shown, BLOCKED);
    hint.settle(3, undefined);
    assert.equal(shown, undefined);
  });

  test("a notice keeps its time through successful moves", () => {
    hint.show("Easy, not so fast!");
    hint.settle(1, undefined);
    assert.equal(shown, "Easy, not so fast!");
    clock.advance(LIFETIME);
    assert.equal(shown, undefined);
  });

  test("after its fade a refusal shows again, and goes again with a step", () => {
    hint.settle(1, BLOCKED);
    clock.advance(LIFETIME);
    hint.settle(2, BLOCKED);
    assert.equal(shown, BLOCKED);
    hint.settle(3, undefined);
    assert.equal(shown, undefined);
  });
});
