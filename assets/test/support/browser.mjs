// Debian's chromium under playwright-core: nothing is downloaded, and the
// flags keep chromium from calling home (without them it can hang trying).
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.GROVE_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Launches a headless chromium. Playwright gives it a fresh profile
 * (--user-data-dir) of its own and removes it on close. `env` is added to
 * the environment chromium starts with (null takes a variable out).
 */
export function launchBrowser({ env } = {}) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no chromium at ${CHROMIUM}: apt-get install -y chromium, or set GROVE_CHROMIUM`);
  }
  let environment;
  if (env) {
    environment = { ...process.env, ...env };
    for (const [name, value] of Object.entries(environment)) if (value === null) delete environment[name];
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    ...(environment ? { env: environment } : {}),
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

// A busy server answers the device login 503 (or 429) with Retry-After,
// and the page waits it out and asks again, as it must; chromium reports
// each such answer on the console all the same.
const SHED = /^Failed to load resource: the server responded with a status of (503|429)\b/;
const LOGIN = "/api/device_login";

/**
 * Opens a page and collects what went wrong in it: uncaught exceptions and
 * console errors. `problems` is checked by the tests at their end; `shed`
 * counts the device logins a busy server asked the page to retry, which
 * are not problems as long as the page then joins.
 */
export async function openGame(browser, url, pageOptions = { viewport: { width: 1200, height: 900 } }, beforeGoto) {
  const page = await browser.newPage(pageOptions);
  // Listeners that must see the page's first requests and frames.
  if (beforeGoto) beforeGoto(page);
  const problems = [];
  const shed = { logins: 0 };
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    if (SHED.test(message.text()) && new URL(message.location().url, url).pathname === LOGIN) {
      shed.logins += 1;
    } else {
      problems.push(`console error: ${message.text()}`);
    }
  });
  await page.goto(url);
  return { page, problems, shed };
}

/** Waits until the page has joined: connected, with its own id known. */
export async function waitJoined(page, timeout = 15_000) {
  await page.waitForFunction(() => window.grove?.state().connected && window.grove.state().id !== undefined, null, {
    timeout,
  });
  return page.evaluate(() => window.grove.state());
}

/** Waits until every area the viewport reaches has come with its ground (protocol 3 on). */
export async function waitAreasGround(page, timeout = 15_000) {
  await page.waitForFunction(
    () => {
      const { x, y, width, height, viewRadius } = window.grove.state();
      for (let dy = -viewRadius; dy <= viewRadius; dy++) {
        for (let dx = -viewRadius; dx <= viewRadius; dx++) {
          const [cx, cy] = [x + dx, y + dy];
          const inside = cx >= 0 && cy >= 0 && cx < width && cy < height;
          if (inside && window.grove.areaGroundAt(cx, cy) === undefined) return false;
        }
      }
      return true;
    },
    null,
    { timeout },
  );
}

export const ARROWS = { n: "ArrowUp", e: "ArrowRight", s: "ArrowDown", w: "ArrowLeft" };
export const WASD = { n: "w", e: "d", s: "s", w: "a" };
const step = { n: [0, -1], e: [1, 0], s: [0, 1], w: [-1, 0] };

/**
 * The movement keys (arrows, or WASD), those whose target cell looks free
 * (passable ground, no entity the client knows of) first. The world may
 * still say no: actors move.
 */
export async function movementKeysByPromise(page, keyFor = ARROWS) {
  const { x, y } = await page.evaluate(() => window.grove.state());
  const scored = [];
  for (const [direction, [dx, dy]] of Object.entries(step)) {
    const cell = await page.evaluate(([cx, cy]) => window.grove.cellAt(cx, cy), [x + dx, y + dy]);
    const free = (cell.terrain === "meadow" || cell.terrain === "flowers") && !cell.entity;
    scored.push({ key: keyFor[direction], free });
  }
  return scored.sort((a, b) => Number(b.free) - Number(a.free)).map((entry) => entry.key);
}

/** Presses a key that should move, and resolves with the outcome of its move. */
export async function pressForOutcome(page, key, timeout = 5000) {
  const seq = (await page.evaluate(() => window.grove.state().seq)) + 1;
  await page.keyboard.press(key);
  const handle = await page.waitForFunction(
    (expected) => window.grove.moveResults().find((entry) => entry.seq === expected),
    seq,
    { timeout },
  );
  return { seq, ...(await handle.jsonValue()) };
}

/**
 * Moves the avatar one cell, trying directions until the world says ok.
 * When every way has been refused (a player can join in a nook of trees
 * whose one way out an actor stands in), it waits for the page to show a
 * neighbouring cell change, an actor's next turn, before trying again, and
 * gives up after `timeout` ms, saying what surrounds the avatar.
 */
export async function moveSomewhere(page, { keys: keyFor = ARROWS, timeout = 30_000 } = {}) {
  const deadline = Date.now() + timeout;
  const results = [];
  for (let i = 0; Date.now() < deadline; i++) {
    const keys = await movementKeysByPromise(page, keyFor);
    // The likeliest first; if it keeps failing (a crowd), the others in turn.
    const key = keys[i % keys.length];
    const outcome = await pressForOutcome(page, key);
    if (outcome.result === "ok") return { key, ...outcome };
    results.push(`${key}: ${outcome.result}`);
    if (i % keys.length === keys.length - 1) await neighboursChange(page, Math.min(2000, deadline - Date.now()));
  }
  throw new Error(`no move succeeded in ${timeout} ms: ${results.join(", ")}; around: ${await around(page)}`);
}

// The four cells beside the avatar as the page shows them.
function besideAvatar(steps) {
  const { x, y } = window.grove.state();
  return JSON.stringify(Object.values(steps).map(([dx, dy]) => window.grove.cellAt(x + dx, y + dy)));
}

// Resolves once the page shows a cell beside the avatar change, or after
// `timeout` ms with none changed.
async function neighboursChange(page, timeout) {
  if (timeout <= 0) return;
  const before = await page.evaluate(besideAvatar, step);
  await page
    .waitForFunction(`(${besideAvatar})(${JSON.stringify(step)}) !== ${JSON.stringify(before)}`, null, { timeout })
    .catch((error) => {
      if (error.name !== "TimeoutError") throw error;
    });
}

async function around(page) {
  const { x, y } = await page.evaluate(() => window.grove.state());
  return `${x},${y} ${await page.evaluate(besideAvatar, step)}`;
}

const blocking = new Set(["tree", "rock", "water"]);

/**
 * Walks until a neighbouring cell is a tree, a rock or water, presses the
 * key toward it, and resolves with that move's outcome (the ground never
 * changes, so it is refused as `blocked`). Needs the terrain loaded. Each
 * step follows the shortest way the page knows to a cell beside such
 * ground, around the players and actors it shows; a step the world
 * refuses (an actor moved in) is avoided for a few steps, so the walk
 * goes round a crowd instead of back and forth in front of it.
 */
export async function refuseSomewhere(page, { keys: keyFor = ARROWS, attempts = 60 } = {}) {
  const avoided = new Map(); // "x,y" -> the step until which it is avoided
  const path = [];
  for (let i = 0; i < attempts; i++) {
    const { x, y } = await page.evaluate(() => window.grove.state());
    for (const [direction, [dx, dy]] of Object.entries(step)) {
      const cell = await page.evaluate(([cx, cy]) => window.grove.cellAt(cx, cy), [x + dx, y + dy]);
      if (blocking.has(cell.terrain)) return pressForOutcome(page, keyFor[direction]);
    }
    for (const [cell, until] of avoided) if (until <= i) avoided.delete(cell);
    const way = await firstStepBeside(page, x, y, [...avoided.keys()]);
    // Nothing known leads there now (a crowd all round): any key, in turn.
    const direction = way ?? Object.keys(step)[i % 4];
    const outcome = await pressForOutcome(page, keyFor[direction]);
    path.push(`${x},${y} ${direction} ${outcome.result}`);
    if (outcome.result !== "ok") {
      const [dx, dy] = step[direction];
      avoided.set(`${x + dx},${y + dy}`, i + 5);
    }
  }
  throw new Error(`no tree, rock or water next to the avatar in ${attempts} steps: ${path.join(", ")}`);
}

// The first step ("n", "e", "s" or "w") of the shortest way over free cells
// (ground that does not block, no entity the page shows, none of the cells
// "x,y" avoided) from a cell to one beside a tree, rock or water; null if
// none is known within 40 cells.
async function firstStepBeside(page, x, y, avoid) {
  return page.evaluate(
    ([sx, sy, steps, kinds, avoided]) => {
      const skip = new Set(avoided);
      const first = new Map([[`${sx},${sy}`, null]]);
      let frontier = [[sx, sy]];
      for (let distance = 0; distance < 40 && frontier.length > 0; distance++) {
        const next = [];
        for (const [cx, cy] of frontier) {
          const from = first.get(`${cx},${cy}`);
          if (from !== null) {
            const beside = Object.values(steps).some(([dx, dy]) =>
              kinds.includes(window.grove.cellAt(cx + dx, cy + dy).terrain),
            );
            if (beside) return from;
          }
          for (const [direction, [dx, dy]] of Object.entries(steps)) {
            const key = `${cx + dx},${cy + dy}`;
            if (first.has(key) || skip.has(key)) continue;
            const cell = window.grove.cellAt(cx + dx, cy + dy);
            if (cell.terrain === undefined || kinds.includes(cell.terrain) || cell.entity) continue;
            first.set(key, from ?? direction);
            next.push([cx + dx, cy + dy]);
          }
        }
        frontier = next;
      }
      return null;
    },
    [x, y, step, [...blocking], avoid],
  );
}

/** What the viewport shows: cell count, the own avatar's cell, and the actors' cells. */
export function screen(page) {
  return page.evaluate(() => {
    const cells = [...document.querySelectorAll("#viewport .cell")];
    const self = document.querySelectorAll("#viewport .cell.self");
    return {
      cells: cells.length,
      selves: self.length,
      self: self[0] ? { x: Number(self[0].dataset.x), y: Number(self[0].dataset.y), text: self[0].textContent } : null,
      actors: [...document.querySelectorAll("#viewport .cell.actor")].map((c) => `${c.dataset.id}@${c.dataset.x},${c.dataset.y}`),
      state: document.getElementById("hud-state").dataset.state,
      stateText: document.getElementById("hud-state").textContent,
      position: document.getElementById("hud-position").textContent,
    };
  });
}
