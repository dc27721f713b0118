#!/usr/bin/env node
// Key press to redrawn avatar: opens Grove in headless chromium, presses
// arrow keys one at a time (waiting for each move's outcome), and reports
// the latency percentiles the page measured from keydown to the animation
// frame that showed the avatar on its new cell.
//
//   node bench/keypress.mjs [URL] [--count 200] [--interval 70] [--json PATH]
//
// URL defaults to http://127.0.0.1:4000/ (a server started with `make run`);
// add ?encoding=binary to it for the binary protocol. --interval is the
// least time between presses in ms: the client paces moves under the
// server's limit (20 a second), and pacing would count as latency.
import { writeFileSync } from "node:fs";
import os from "node:os";
import { parseArgs } from "node:util";
import { launchBrowser, openGame, waitJoined } from "../test/support/browser.mjs";

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    count: { type: "string", default: "200" },
    interval: { type: "string", default: "70" },
    json: { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});
if (options.help) {
  console.log("usage: node bench/keypress.mjs [URL] [--count N] [--interval MS] [--json PATH]");
  process.exit(0);
}
const url = positionals[0] ?? "http://127.0.0.1:4000/";
const count = Number(options.count);
const intervalMs = Number(options.interval);
if (!(count > 0) || !(intervalMs >= 0)) throw new Error("--count and --interval take positive numbers");

const keys = { n: "ArrowUp", e: "ArrowRight", s: "ArrowDown", w: "ArrowLeft" };

// In the page: the direction to press next. Back where the last move came
// from when that cell is free, so the avatar paces around its start; else
// any free-looking cell; else any (the refusal is counted).
function chooseDirection(lastOk) {
  const { x, y } = window.grove.state();
  const steps = { n: [0, -1], e: [1, 0], s: [0, 1], w: [-1, 0] };
  const free = (direction) => {
    const [dx, dy] = steps[direction];
    const cell = window.grove.cellAt(x + dx, y + dy);
    return (cell.terrain === "meadow" || cell.terrain === "flowers") && !cell.entity;
  };
  const back = lastOk ? { n: "s", s: "n", e: "w", w: "e" }[lastOk] : undefined;
  if (back && free(back)) return back;
  const candidates = Object.keys(steps).filter(free);
  const pool = candidates.length > 0 ? candidates : Object.keys(steps);
  return pool[Math.floor(Math.random() * pool.length)];
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const browser = await launchBrowser();
try {
  const { page, problems } = await openGame(browser, url);
  const joined = await waitJoined(page, 30_000);
  console.log(
    `keypress: ${url} joined as ${joined.id} at ${joined.x},${joined.y} (${joined.encoding}); ${count} presses, one per outcome, at least ${intervalMs} ms apart`,
  );

  const outcomes = {};
  let timeouts = 0;
  let lastOk;
  let lastPress = 0;
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const direction = await page.evaluate(chooseDirection, lastOk);
    const wait = lastPress + intervalMs - performance.now();
    if (wait > 0) await new Promise((done) => setTimeout(done, wait));

    const seq = (await page.evaluate(() => window.grove.state().seq)) + 1;
    lastPress = performance.now();
    await page.keyboard.press(keys[direction]);
    // Waits in the page for the move to be refused or shown, without
    // polling: a poll every frame would load the machine being measured.
    const result = await page.evaluate(
      ([expected, limit]) =>
        Promise.race([window.grove.moveDone(expected), new Promise((done) => setTimeout(done, limit, "timeout"))]),
      [seq, 2000],
    );
    if (result === "timeout") {
      timeouts++;
    } else {
      outcomes[result] = (outcomes[result] ?? 0) + 1;
      if (result === "ok") lastOk = direction;
    }
    if ((i + 1) % 50 === 0 || i + 1 === count) {
      process.stdout.write(`keypress: ${i + 1}/${count} presses, ${outcomes.ok ?? 0} ok\n`);
    }
  }
  const elapsedS = (performance.now() - started) / 1000;

  const timings = await page.evaluate(() => window.grove.moveTimings());
  const round = (ms) => Math.round(ms * 10) / 10;
  const summarise = (values) => {
    const sorted = values.slice().sort((a, b) => a - b);
    return {
      count: sorted.length,
      p50: round(percentile(sorted, 50)),
      p95: round(percentile(sorted, 95)),
      p99: round(percentile(sorted, 99)),
      max: round(sorted[sorted.length - 1] ?? NaN),
      mean: round(sorted.reduce((sum, ms) => sum + ms, 0) / sorted.length),
    };
  };
  const summary = summarise(timings.map((timing) => timing.shown));
  // Where the time went: to the outcome drawn in the DOM (network, server,
  // page), then waiting for the frame.
  const answered = summarise(timings.map((timing) => timing.answered));
  const frame = summarise(timings.map((timing) => timing.shown - timing.answered));
  const refused = Object.entries(outcomes)
    .filter(([result]) => result !== "ok")
    .map(([result, n]) => `${n} ${result}`);

  console.log("");
  console.log(`key press to redrawn avatar (${summary.count} moves ok of ${count} presses in ${elapsedS.toFixed(1)} s)`);
  const line = (label, stats) =>
    console.log(`  ${label.padEnd(26)} p50 ${stats.p50} ms   p95 ${stats.p95} ms   p99 ${stats.p99} ms   max ${stats.max} ms`);
  line("key press to redrawn", summary);
  line("  of which to outcome drawn", answered);
  line("  then waiting for frame", frame);
  console.log(`  refused: ${refused.length > 0 ? refused.join(", ") : "none"}; no outcome within 2 s: ${timeouts}`);
  if (problems.length > 0) console.log(`  page problems: ${problems.join(" | ")}`);

  if (options.json) {
    const report = {
      bench: "keypress",
      command: `node bench/keypress.mjs ${process.argv.slice(2).join(" ")}`.trim(),
      url,
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memory_gb: Math.round(os.totalmem() / 2 ** 30) },
      browser: `chromium ${browser.version()}`,
      encoding: joined.encoding,
      presses: count,
      interval_ms: intervalMs,
      outcomes,
      timeouts,
      latency_ms: summary,
      to_outcome_drawn_ms: answered,
      frame_wait_ms: frame,
      samples: timings.map(({ seq, sent, answered, shown }) => ({
        seq,
        sent: round(sent),
        answered: round(answered),
        shown: round(shown),
      })),
      page_problems: problems,
    };
    writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`  report written to ${options.json}`);
  }
} finally {
  await browser.close();
}
