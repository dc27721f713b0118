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

/** Moves the avatar one cell, trying directions until the world says ok. */
export async function moveSomewhere(page, { keys: keyFor = ARROWS, attempts = 30 } = {}) {
  const results = [];
  for (let i = 0; i < attempts; i++) {
    const keys = await movementKeysByPromise(page, keyFor);
    // The likeliest first; if it keeps failing (a crowd), the others in turn.
    const key = keys[i % keys.length];
    const outcome = await pressForOutcome(page, key);
    if (outcome.result === "ok") return { key, ...outcome };
    results.push(`${key}: ${outcome.result}`);
  }
  throw new Error(`no move succeeded in ${attempts} tries: ${results.join(", ")}`);
}

const blocking = new Set(["tree", "rock", "water"]);

/**
 * Walks until a neighbouring cell is a tree, a rock or water, presses the
 * key toward it, and resolves with that move's outcome (the ground never
 * changes, so it is refused as `blocked`). Needs the terrain loaded. A
 * target whose way in stays taken (pickers stand around trees) is given
 * up for the next nearest, so the walk does not circle one crowded tree.
 */
export async function refuseSomewhere(page, { keys: keyFor = ARROWS, attempts = 60 } = {}) {
  const given = new Set();
  const path = [];
  for (let i = 0; i < attempts; i++) {
    const { x, y } = await page.evaluate(() => window.grove.state());
    path.push(`${x},${y}`);
    for (const [direction, [dx, dy]] of Object.entries(step)) {
      const cell = await page.evaluate(([cx, cy]) => window.grove.cellAt(cx, cy), [x + dx, y + dy]);
      if (blocking.has(cell.terrain)) return pressForOutcome(page, keyFor[direction]);
    }
    const target = await nearestBlocking(page, x, y, [...given]);
    const closer = await stepToward(page, target, keyFor);
    if (target !== null && !closer) given.add(`${target[0]},${target[1]}`);
  }
  throw new Error(
    `no tree, rock or water next to the avatar in ${attempts} steps: it stood at ${path.join(" ")}; ` +
      `targets given up: ${[...given].join(" ") || "none"}`,
  );
}

// The nearest tree, rock or water the loaded terrain shows, by rings around
// a cell, other than the cells ("x,y") given up.
async function nearestBlocking(page, x, y, givenUp) {
  return page.evaluate(
    ([cx, cy, kinds, skip]) => {
      for (let r = 1; r <= 50; r++) {
        for (let dy = -r; dy <= r; dy++) {
          for (let dx = -r; dx <= r; dx++) {
            if (Math.max(Math.abs(dx), Math.abs(dy)) !== r) continue;
            if (skip.includes(`${cx + dx},${cy + dy}`)) continue;
            if (kinds.includes(window.grove.cellAt(cx + dx, cy + dy).terrain)) return [cx + dx, cy + dy];
          }
        }
      }
      return null;
    },
    [x, y, [...blocking], givenUp],
  );
}

// One step that brings the avatar closer to a cell; true if it did, false
// if no such step was taken (then it steps anywhere it can, to try again
// from elsewhere).
async function stepToward(page, target, keyFor) {
  if (target !== null) {
    const { x, y } = await page.evaluate(() => window.grove.state());
    const distance = ([dx, dy]) => Math.abs(target[0] - (x + dx)) + Math.abs(target[1] - (y + dy));
    const closer = Object.entries(step)
      .filter(([, delta]) => distance(delta) < distance([0, 0]))
      .map(([direction]) => keyFor[direction]);
    for (const key of closer) {
      const outcome = await pressForOutcome(page, key);
      if (outcome.result === "ok") return true;
    }
  }
  await moveSomewhere(page, { keys: keyFor });
  return false;
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
