// Starts a real Grove server for the browser tests, as an OS process:
// scripts/test-server (or the script named by GROVE_TEST_SERVER, such as
// test/mock-server.mjs) with GROVE_PORT, GROVE_ACTORS, GROVE_WIDTH and
// GROVE_HEIGHT (and the variables given as `env`, null for one to leave
// out), ready once it prints "grove: listening on http://...".
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

const assetsDir = resolve(fileURLToPath(import.meta.url), "../../..");

export const TEST_SERVER = process.env.GROVE_TEST_SERVER
  ? resolve(process.cwd(), process.env.GROVE_TEST_SERVER)
  : resolve(assetsDir, "../scripts/test-server");

/** Why the browser tests cannot run here, or false when they can. */
export const skipReason = existsSync(TEST_SERVER)
  ? false
  : `${TEST_SERVER} does not exist (set GROVE_TEST_SERVER to another server script)`;

const READY = /grove: listening on (http:\/\/\S+?)\/?(?:\s|$)/;

/**
 * Starts the server and resolves once it is listening, with its base URL,
 * its port and stop(). It takes a port of its own (GROVE_PORT 0) unless
 * told one: a port found free and asked for again later may be taken
 * meanwhile. Start-up may include compiling, hence the generous limit.
 */
export function startServer({ port = 0, actors, width = 100, height = 100, env = {}, readyTimeoutMs = 180_000 }) {
  const environment = {
    ...process.env,
    ...env,
    GROVE_PORT: String(port),
    GROVE_ACTORS: String(actors),
    GROVE_WIDTH: String(width),
    GROVE_HEIGHT: String(height),
  };
  // A variable given as null is taken out of what the server inherits.
  for (const [name, value] of Object.entries(environment)) if (value === null) delete environment[name];
  const child = spawn(TEST_SERVER, [], {
    cwd: resolve(assetsDir, ".."),
    env: environment,
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so stop() reaches whatever the script started.
    detached: true,
  });
  let output = "";
  const exited = new Promise((resolveExit) => child.once("exit", (code, signal) => resolveExit({ code, signal })));

  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    signalGroup(child.pid, "SIGTERM");
    const killer = setTimeout(() => signalGroup(child.pid, "SIGKILL"), 15_000);
    await exited;
    clearTimeout(killer);
  };

  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`${TEST_SERVER} printed no "grove: listening on" line in ${readyTimeoutMs} ms:\n${output}`));
    }, readyTimeoutMs);
    let started = false;
    const scan = (chunk) => {
      output += chunk;
      const ready = !started && output.match(READY);
      if (ready) {
        started = true;
        clearTimeout(timer);
        const url = new URL(`${ready[1]}/`);
        resolveStart({ url: url.href, port: Number(url.port), stop, output: () => output });
      }
    };
    child.stdout.setEncoding("utf8").on("data", scan);
    child.stderr.setEncoding("utf8").on("data", scan);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${TEST_SERVER} exited (${code ?? signal}) before listening:\n${output}`));
    });
  });
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if (error.code !== "ESRCH") throw error;
  }
}
