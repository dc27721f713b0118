// Move bookkeeping: sequence numbers, results and latencies. (The pacer
// that keeps a player under the server's rate limit is the client
// library's: clients/js/test/pacer.test.mjs.)
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { importSource } from "./support/compile.mjs";

const { MoveLog } = await importSource("moves");

const outcome = (seq, result = "ok") => ({ type: "outcome", seq, result, x: 1, y: 2 });

describe("MoveLog", () => {
  test("numbers moves from 1 and keeps numbering after a reconnect", () => {
    const log = new MoveLog();
    assert.equal(log.lastSeq, 0);
    assert.equal(log.start("n", performance.now()).seq, 1);
    assert.equal(log.start("e", performance.now()).seq, 2);
    log.forgetPending();
    assert.equal(log.settle(outcome(2)), undefined, "a lost connection's moves are forgotten");
    assert.equal(log.start("s", performance.now()).seq, 3);
  });

  test("records each seq's result and each shown move's timing", () => {
    const log = new MoveLog();
    // Whole milliseconds, so the differences below are exact.
    const started = Math.floor(performance.now());
    const first = log.start("n", started);
    const second = log.start("e", started);
    assert.equal(log.settle(outcome(first.seq, "blocked")), first);
    assert.equal(log.settle(outcome(second.seq)), second);
    log.recordShown(second, started + 3, started + 10);
    assert.deepEqual(log.results, [
      { seq: 1, result: "blocked", direction: "n" },
      { seq: 2, result: "ok", direction: "e" },
    ]);
    assert.equal(log.timings.length, 1);
    assert.equal(log.timings[0].seq, 2);
    assert.equal(log.timings[0].answered, 3);
    assert.equal(log.timings[0].shown, 10);
  });

  test("whenDone waits for a refusal, or for an ok move to be shown", async () => {
    const log = new MoveLog();
    const refused = log.start("n", performance.now());
    const moved = log.start("e", performance.now());
    const refusedDone = log.whenDone(refused.seq);
    const movedDone = log.whenDone(moved.seq);
    let shown = false;
    movedDone.then(() => (shown = true));

    log.settle(outcome(refused.seq, "occupied"));
    assert.equal(await refusedDone, "occupied");
    log.settle(outcome(moved.seq));
    await Promise.resolve();
    assert.equal(shown, false, "not done before its frame");
    log.recordShown(moved, performance.now(), performance.now());
    assert.equal(await movedDone, "ok");
    assert.equal(await log.whenDone(moved.seq), "ok", "and later asks resolve at once");
  });
});
