// Playing the orchard (the game `make run` ships) in a headless chromium
// against a real server started by scripts/test-server: walk to a tree
// that bears, pick with the key and with the button, walk to a basket and
// deliver with Space; the panel, the board and the refusals say so.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openGame, pressForOutcome, waitAreasGround, waitJoined, ARROWS } from "./support/browser.mjs";
import { skipReason, startServer, TEST_SERVER } from "./support/server.mjs";

const mock = TEST_SERVER.endsWith("mock-server.mjs");

/**
 * Walks the avatar (arrow keys) to a free cell next to one showing `code`,
 * by the shortest path over what the page knows: the ground, the game's
 * cells, the entities. Recomputed after every step (actors move). The page
 * knows the game's cells only in the view tiles around the player: while
 * none in sight shows `code`, it explores, heading east, south, west and
 * north in turn, twenty steps each, as far as the ground lets it.
 */
async function walkNextTo(page, code, maxSteps = 400) {
  for (let steps = 0; steps < maxSteps; steps++) {
    const turn = Math.floor(steps / 20) % 4;
    const path = await page.evaluate(([wanted, turn]) => {
      const { x, y } = window.grove.state();
      const passable = (cx, cy) => {
        const cell = window.grove.cellAt(cx, cy);
        return (cell.terrain === "meadow" || cell.terrain === "flowers") && cell.code !== 2 && !cell.entity;
      };
      // Next to a cell showing `wanted` and to none of another action's
      // (a tree beside a basket), so that what fits is the action wanted.
      const goal = (cx, cy) => {
        let near = false;
        for (let dy = -1; dy <= 1; dy++)
          for (let dx = -1; dx <= 1; dx++) {
            if (!dx && !dy) continue;
            const code = window.grove.cellAt(cx + dx, cy + dy).code;
            if (code === wanted) near = true;
            else if (code === 1 || code === 2) return false;
          }
        return near;
      };
      if (goal(x, y)) return [];
      const seen = new Map([[`${x},${y}`, null]]);
      const queue = [[x, y]];
      const pathTo = (key) => {
        const path = [];
        for (let at = key; seen.get(at); at = seen.get(at)[0]) path.unshift(seen.get(at)[1]);
        return path;
      };
      // The reachable cell farthest along each heading, should none show
      // `wanted`: east, south, west, north.
      const headings = [[1, 0], [0, 1], [-1, 0], [0, -1]];
      const farthest = headings.map(() => ({ key: null, along: 0 }));
      const moves = { n: [0, -1], e: [1, 0], s: [0, 1], w: [-1, 0] };
      while (queue.length > 0) {
        const [cx, cy] = queue.shift();
        for (const [dir, [dx, dy]] of Object.entries(moves)) {
          const nx = cx + dx;
          const ny = cy + dy;
          const key = `${nx},${ny}`;
          if (seen.has(key) || Math.abs(nx - x) > 60 || Math.abs(ny - y) > 60 || !passable(nx, ny)) continue;
          seen.set(key, [`${cx},${cy}`, dir]);
          if (goal(nx, ny)) return pathTo(key);
          headings.forEach(([hx, hy], i) => {
            const along = (nx - x) * hx + (ny - y) * hy;
            if (along > farthest[i].along) farthest[i] = { key, along };
          });
          queue.push([nx, ny]);
        }
      }
      for (let i = 0; i < 4; i++) {
        const { key } = farthest[(turn + i) % 4];
        if (key !== null) return pathTo(key);
      }
      return null;
    }, [code, turn]);
    if (path === null) throw new Error(`no cell showing ${code} within reach, nor a step to look further`);
    if (path.length === 0) return;
    await pressForOutcome(page, ARROWS[path[0]]);
  }
  throw new Error(`not next to ${code} after ${maxSteps} steps`);
}

/** Waits for the answer to action `seq`. */
async function acted(page, seq, timeout = 5000) {
  const handle = await page.waitForFunction(
    (expected) => window.grove.game().acts.find((entry) => entry.seq === expected),
    seq,
    { timeout },
  );
  return handle.jsonValue();
}

/**
 * Opens the game and waits until the page knows the world's game is the
 * orchard and holds every area its view reaches. Not until it holds some
 * game cells: areas are view tiles of ten cells a side, and those around a
 * player on an open meadow may show none (no tree, no basket), which only
 * walking changes. The page fetches the game's description once (again
 * only after a reconnect) and warns when that fails: on a timeout, the
 * error says what the page lacked and what it warned.
 */
async function openOrchard(browser, url) {
  const warnings = [];
  const { page, problems } = await openGame(browser, url, undefined, (page) =>
    page.on("console", (message) => {
      if (message.type() === "warning") warnings.push(message.text());
    }),
  );
  await waitJoined(page);
  try {
    await waitAreasGround(page);
    await page.waitForFunction(() => window.grove.game().game === "orchard");
  } catch (error) {
    const seen = await page.evaluate(() => {
      const { connected, x, y } = window.grove.state();
      const { game, cells } = window.grove.game();
      return { connected, x, y, game: game ?? null, cells: cells.length };
    });
    throw new Error(`no orchard on the page: ${JSON.stringify(seen)}, warnings: ${JSON.stringify(warnings)}`, {
      cause: error,
    });
  }
  return { page, problems };
}

const nextSeq = (page) => page.evaluate(() => window.grove.game().acts.length + 1);

describe("playing the orchard", { skip: mock ? "the mock server has no game" : skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;

  // Actors that walk, wander and graze, but no pickers: the player is then
  // the only one who takes apples, so a tree the page saw bearing still
  // bears when the player, next to it, picks or taps (a picker could take
  // its last apple meanwhile, and the pad's button, finding nothing to do,
  // would send nothing at all), and the walk's tree stays where it was.
  before(async () => {
    server = await startServer({
      actors: 100,
      width: 100,
      height: 100,
      env: { GROVE_ACTOR_KINDS: "walker:13,wanderer:3,grazer:2" },
    });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test("pick apples from a tree, by key and by tap, and deliver them into a basket with Space", async () => {
    const { page, problems } = await openOrchard(browser, server.url);

    // The panel explains the game and its keys.
    const panel = await page.evaluate(() => ({
      hidden: document.getElementById("game").hidden,
      title: document.querySelector("#game h2")?.textContent,
      buttons: [...document.querySelectorAll("#game .game-actions button")].map((b) => b.textContent),
      keys: document.querySelector("#game .game-keys")?.textContent,
    }));
    assert.equal(panel.hidden, false);
    assert.equal(panel.title, "Orchard");
    assert.deepEqual(panel.buttons, ["🧺DeliverR", "🍎PickF"]);
    assert.equal(await page.evaluate(() => document.querySelector("#game .game-board h3")?.textContent), "Best pickers");
    assert.match(panel.keys, /Space/);

    // A tree that bears shows 🍎 in its corner: the walk ends next to one.
    await walkNextTo(page, 1);
    const badges = await page.evaluate(() => [...document.querySelectorAll("#viewport .cell[data-badge]")].length);
    const apples = await page.evaluate(() => window.grove.game().cells.filter((cell) => cell.code === 1).length);
    assert.ok(apples > 0, "trees bear apples");

    let seq = await nextSeq(page);
    await page.keyboard.press("f");
    let answer = await acted(page, seq);
    assert.equal(answer.result, "ok", JSON.stringify(answer));
    assert.equal(answer.action, "pick");
    assert.equal(answer.data.carrying, 1);
    await page.waitForFunction(() => document.querySelector("#game .game-status").textContent.includes("🍎"));
    // The player's own look comes with the areas: one apple under the avatar.
    await page.waitForFunction(() => window.grove.game().look === 1);
    await page.waitForFunction(() => document.querySelector("#viewport .cell.self")?.dataset.look === "🍎");

    // A tap on the button picks too, when the tree still bears.
    const code = await page.evaluate(() => {
      const { x, y } = window.grove.state();
      for (let dy = -1; dy <= 1; dy++)
        for (let dx = -1; dx <= 1; dx++) if (window.grove.cellAt(x + dx, y + dy).code === 1) return 1;
      return 0;
    });
    if (code === 1) {
      seq = await nextSeq(page);
      await page.click('#game button[data-action="pick"]');
      answer = await acted(page, seq);
      assert.equal(answer.action, "pick");
      assert.ok(["ok", "refused"].includes(answer.result), JSON.stringify(answer));
    }

    // To a basket; Space does what fits there: deliver.
    await walkNextTo(page, 2);
    seq = await nextSeq(page);
    await page.keyboard.press("Space");
    answer = await acted(page, seq);
    assert.equal(answer.action, "deliver");
    assert.equal(answer.result, "ok");
    assert.ok(answer.data.score >= 1);
    await page.waitForFunction(() => /score [1-9]/.test(document.querySelector("#game .game-status").textContent));

    // The leaderboard (kept in the store) has this player: a device account
    // without a name shows as its avatar and number.
    const board = await page.waitForFunction(
      () => {
        const items = [...document.querySelectorAll("#game .game-board li")].map((li) => li.textContent);
        return items.find((text) => /player \d+.*[1-9]/.test(text));
      },
      null,
      { timeout: 15_000 },
    );
    assert.match(await board.jsonValue(), /🍎/);

    // With empty hands, the game says why not, in its words.
    seq = await nextSeq(page);
    await page.keyboard.press("r");
    answer = await acted(page, seq);
    assert.equal(answer.result, "refused");
    assert.equal(answer.reason, "empty_hands");
    await page.waitForFunction(() => document.getElementById("hint").textContent.includes("You carry no apples"));

    assert.ok(badges >= 0);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("without a keyboard, the pad's action button does what fits, as Space does", async () => {
    const { page, problems } = await openOrchard(browser, `${server.url}?pad=on`);
    await page.waitForFunction(() => document.querySelector("#pad .pad-act")?.textContent.includes("Act"));

    await walkNextTo(page, 1);
    const seq = await nextSeq(page);
    await page.click("#pad .pad-act");
    const answer = await acted(page, seq);
    assert.equal(answer.action, "pick");
    assert.equal(answer.result, "ok", JSON.stringify(answer));
    assert.equal(answer.data.carrying, 1);
    assert.deepEqual(problems, []);
    await page.close();
  });
});
