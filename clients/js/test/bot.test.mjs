// The README's bot, run as it is (node examples/bot.mjs URL STEPS) against
// a real server: it joins, walks, reports, and exits by itself.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { skipReason, startServer } from "../../../assets/test/support/server.mjs";

const bot = fileURLToPath(new URL("../examples/bot.mjs", import.meta.url));

function run(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [bot, ...args], { timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (error.code ?? error.signal) : 0, stdout, stderr }),
    );
  });
}

test("the README shows the bot as it is", () => {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const source = readFileSync(bot, "utf8").trim();
  assert.ok(readme.includes(source), "README.md has examples/bot.mjs verbatim");
  assert.ok(source.split("\n").length <= 25, "about twenty lines");
});

describe("the bot", { skip: skipReason, timeout: 300_000 }, () => {
  let server;

  before(async () => {
    server = await startServer({ port: 0, actors: 100, width: 100, height: 100 });
  });

  after(async () => {
    await server?.stop();
  });

  test("joins a real server, walks its steps, says where it got to, and exits", async () => {
    const { code, stdout, stderr } = await run(server.url, "30");
    assert.equal(code, 0, stderr);
    const joined = stdout.match(/^joined as (\d+) at (\d+),(\d+)$/m);
    assert.ok(joined, stdout);
    const walked = stdout.match(/^walked (\d+) of 30 steps to (\d+),(\d+); (\d+) others in view$/m);
    assert.ok(walked, stdout);
    assert.ok(Number(walked[1]) > 0, "it got somewhere");
  });
});
