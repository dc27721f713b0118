// Playing Grove in a headless chromium against a real server started by
// scripts/test-server: a small, crowded world (2000 actors on 100 x 100).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  launchBrowser,
  moveSomewhere,
  openGame,
  pressForOutcome,
  refuseSomewhere,
  screen,
  WASD,
  waitAreasGround,
  waitJoined,
} from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

describe("playing", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;

  before(async () => {
    server = await startServer({ actors: 2000, width: 100, height: 100 });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test("the page shows the 17 x 17 viewport, the avatar and a connected HUD", async () => {
    const { page, problems } = await openGame(browser, server.url);
    const state = await waitJoined(page);
    // Views are drawn at the next animation frame.
    await page.waitForFunction(() => window.grove.state().entities > 0);
    const shown = await screen(page);

    assert.equal(state.viewRadius, 8);
    assert.equal(shown.cells, 17 * 17);
    assert.equal(shown.selves, 1);
    assert.equal(shown.self.text, "😀");
    assert.deepEqual([shown.self.x, shown.self.y], [state.x, state.y]);
    assert.equal(shown.state, "connected");
    assert.equal(shown.stateText, "connected");
    assert.equal(shown.position, `${state.x}, ${state.y}`);
    assert.equal(state.width, 100);
    assert.equal(state.height, 100);
    // A world this small has its whole ground fetched, once the welcome has said its size.
    await page.waitForFunction(() => window.grove.state().terrainLoaded);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("a device login a busy server sheds is waited out and asked again, not counted a problem", async () => {
    let asked = 0;
    const { page, problems, shed } = await openGame(browser, server.url, undefined, (page) =>
      page.route("**/api/device_login", (route) => {
        asked += 1;
        if (asked > 1) return route.continue();
        return route.fulfill({
          status: 503,
          headers: { "retry-after": "0" },
          contentType: "application/json",
          body: JSON.stringify({ error: "busy", message: "the server is busy; try again shortly" }),
        });
      }),
    );
    await waitJoined(page);
    assert.equal(asked, 2);
    assert.equal(shed.logins, 1);
    assert.deepEqual(problems, []);
    // Any other failed resource is still a problem.
    const logged = new Promise((resolve) => page.once("console", resolve));
    await page.evaluate(() => fetch("/no-such-thing").catch(() => undefined));
    await logged;
    assert.equal(problems.length, 1, JSON.stringify(problems));
    await page.close();
  });

  test("the page speaks protocol 7, and draws each area's ground as it came with the area", async () => {
    const { page, problems } = await openGame(browser, server.url);
    const state = await waitJoined(page);
    assert.equal(state.protocol, 7);
    await page.waitForFunction(() => window.grove.state().terrainLoaded);
    await waitAreasGround(page);

    // The whole world's ground, as /terrain serves it, against what the areas brought.
    const whole = await page.evaluate(async () => {
      const response = await fetch("/terrain");
      return Array.from(new Uint8Array(await response.arrayBuffer()));
    });
    const kinds = ["meadow", "tree", "rock", "water", "flowers"];
    const seen = await page.evaluate(
      ([x, y]) => {
        const cells = [];
        for (let dy = -8; dy <= 8; dy++) {
          for (let dx = -8; dx <= 8; dx++) cells.push([x + dx, y + dy, window.grove.areaGroundAt(x + dx, y + dy)]);
        }
        return cells;
      },
      [state.x, state.y],
    );
    const inside = seen.filter(([x, y]) => x >= 0 && y >= 0 && x < 100 && y < 100);
    assert.ok(inside.length > 0);
    for (const [x, y, kind] of inside) assert.equal(kind, kinds[whole[y * 100 + x]], `the ground at ${x}, ${y}`);

    // Version 5 on places the areas' entities from their area's corner: the
    // player on its own cell, and every entity in view on free ground.
    const placed = await page.evaluate(
      ([x, y]) => {
        const found = [];
        for (let dy = -8; dy <= 8; dy++) {
          for (let dx = -8; dx <= 8; dx++) {
            const entity = window.grove.cellAt(x + dx, y + dy).entity;
            if (entity) found.push([x + dx, y + dy, entity.id]);
          }
        }
        return found;
      },
      [state.x, state.y],
    );
    assert.ok(placed.some(([x, y, id]) => x === state.x && y === state.y && id === state.id), "the player on its cell");
    for (const [x, y] of placed) assert.ok([0, 4].includes(whole[y * 100 + x]), `an entity at ${x}, ${y} on free ground`);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("an area's ground comes once a connection, and walkers that stay in their area come without their kind", async () => {
    // Every frame the page reads, in order: grounds and the areas' parts (protocol 7's JSON arrays).
    const frames = [];
    const { page, problems } = await openGame(browser, server.url, undefined, (page) =>
      page.on("websocket", (socket) =>
        socket.on("framereceived", ({ payload }) => {
          const message = JSON.parse(String(payload));
          if (Array.isArray(message) && (message[0] === 80 || message[0] === 82)) frames.push(message);
        }),
      ),
    );
    const state = await waitJoined(page);
    await waitAreasGround(page);
    // A walk about, out of some areas and back into others.
    for (let step = 0; step < 12; step++) await moveSomewhere(page);
    await waitAreasGround(page);

    const grounds = new Set();
    let stayed = 0;
    for (const message of frames) {
      if (message[0] === 80) {
        assert.ok(!grounds.has(message[1]), `area ${message[1]}'s ground came twice`);
        grounds.add(message[1]);
        continue;
      }
      // The parts one after another, after the tag: the area, its
      // entities, then gone ids or true.
      const parts = message.slice(1);
      assert.ok(parts.length > 0 && typeof parts[0] === "number", "the parts spread in the message");
      for (let i = 0; i < parts.length; ) {
        const [area, flat] = [parts[i], parts[i + 1]];
        i += 2;
        const full = parts[i] === true;
        if (full || Array.isArray(parts[i])) i++;
        assert.ok(grounds.has(area), `area ${area}'s part came before its ground`);
        if (full) continue;
        for (let k = 0; k < flat.length; k += flat[k] < 0 ? 3 : 2) if (flat[k] > 0) stayed++;
      }
    }
    assert.ok(stayed > 0, "some walker stayed in its area, and came without its kind");

    // Each area's ground drawn as /terrain has it, after the walk.
    const whole = await page.evaluate(async () => Array.from(new Uint8Array(await (await fetch("/terrain")).arrayBuffer())));
    const kinds = ["meadow", "tree", "rock", "water", "flowers"];
    const now = await page.evaluate(() => window.grove.state());
    for (let dy = -8; dy <= 8; dy++) {
      for (let dx = -8; dx <= 8; dx++) {
        const [x, y] = [now.x + dx, now.y + dy];
        if (x < 0 || y < 0 || x >= 100 || y >= 100) continue;
        const kind = await page.evaluate(([x, y]) => window.grove.areaGroundAt(x, y), [x, y]);
        assert.equal(kind, kinds[whole[y * 100 + x]], `the ground at ${x}, ${y}`);
      }
    }
    assert.equal(state.protocol, 7);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("an arrow key moves the avatar", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    const before = await screen(page);

    const move = await moveSomewhere(page);
    const state = await page.evaluate(() => window.grove.state());
    const after = await screen(page);

    assert.notDeepEqual([after.self.x, after.self.y], [before.self.x, before.self.y]);
    assert.deepEqual([after.self.x, after.self.y], [state.x, state.y]);
    assert.equal(Math.abs(state.x - before.self.x) + Math.abs(state.y - before.self.y), 1, "one cell");
    assert.equal(after.position, `${state.x}, ${state.y}`);
    assert.notEqual(after.position, before.position);
    assert.equal(after.selves, 1);
    // The latency of that move was measured at the frame that showed it.
    await page.waitForFunction(() => window.grove.moveLatencies().length > 0);
    assert.ok(move.seq >= 1);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("WASD moves too", async () => {
    const { page, problems } = await openGame(browser, server.url);
    const before = await waitJoined(page);
    await moveSomewhere(page, { keys: WASD });
    const after = await page.evaluate(() => window.grove.state());
    assert.equal(Math.abs(after.x - before.x) + Math.abs(after.y - before.y), 1);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("a held key keeps moving, under the server's rate limit", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    const errors = [];
    page.on("websocket", (socket) =>
      socket.on("framereceived", ({ payload }) => {
        if (String(payload).includes('"rate_limited"')) errors.push(String(payload));
      }),
    );

    const heldFrom = Date.now();
    await page.keyboard.down("ArrowRight");
    await page.waitForFunction(() => window.grove.moveResults().length === 1, null, { timeout: 5000 });
    // Down for several repeat intervals by the page's own clock, but not yet
    // repeated by the browser: a press, however long, is one step.
    const downAt = await page.evaluate(() => performance.now());
    await page.waitForFunction((since) => performance.now() > since + 4 * 120, downAt);
    assert.equal((await page.evaluate(() => window.grove.state())).seq, 1, "a press is one step");
    // The browser's key repeat says it is held: it walks on.
    await page.keyboard.down("ArrowRight");
    await page.waitForFunction(() => window.grove.state().seq >= 4, null, { timeout: 10_000 });
    await page.keyboard.up("ArrowRight");
    const heldMs = Date.now() - heldFrom;
    const { seq } = await page.evaluate(() => window.grove.state());

    // One move at the press, then one per repeat: never faster than 10 a second.
    assert.ok(seq <= 2 + heldMs / 100, `${seq} moves in ${heldMs} ms`);
    const results = await page.evaluate(() => window.grove.moveResults().map((entry) => entry.result));
    assert.ok(!results.includes("rate_limited"), results.join(", "));
    assert.deepEqual(errors, []);
    // Released: no more moves.
    const pongs = await page.evaluate(() => window.grove.stats().pongs);
    await page.waitForFunction((count) => window.grove.stats().pongs > count, pongs, { timeout: 5000 });
    assert.equal((await page.evaluate(() => window.grove.state())).seq, seq);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("walking on after a refusal takes its hint away", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    await page.waitForFunction(() => window.grove.state().terrainLoaded);
    await waitAreasGround(page);
    const hint = () =>
      page.evaluate(() => {
        const line = document.getElementById("hint");
        return { text: line.textContent, shown: line.classList.contains("shown") };
      });

    // Into a tree, a rock or water: the world says why not.
    const refused = await refuseSomewhere(page);
    assert.equal(refused.result, "blocked");
    assert.equal((await hint()).text, "Something is in the way.");

    // Once a step has succeeded and is on screen, the hint is gone, however
    // soon after the refusal that was.
    const step = await moveSomewhere(page);
    assert.equal(await page.evaluate((seq) => window.grove.moveDone(seq), step.seq), "ok");
    assert.equal((await hint()).shown, false);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("actors move on screen without a key pressed", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    await page.waitForFunction(() => document.querySelectorAll("#viewport .cell.actor").length > 0);
    const first = (await screen(page)).actors;

    // Within a few ticks some actor in sight has moved, come or gone.
    await page.waitForFunction(
      (seen) => {
        const now = [...document.querySelectorAll("#viewport .cell.actor")].map(
          (c) => `${c.dataset.id}@${c.dataset.x},${c.dataset.y}`,
        );
        return now.join(" ") !== seen.join(" ");
      },
      first,
      { timeout: 10_000 },
    );
    const state = await page.evaluate(() => window.grove.state());
    assert.equal(state.seq, 0, "no move was sent");
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("other keys change nothing and break nothing", async () => {
    const { page, problems } = await openGame(browser, server.url);
    const before = await waitJoined(page);

    for (const key of ["x", "Tab", "Alt", "Control", "Shift", "1", "Escape", "Enter", "Space", "q", "Meta"]) {
      await page.keyboard.press(key);
    }
    // Modifier chords belong to the browser, even with an arrow key.
    await page.keyboard.press("Control+ArrowRight");
    await page.keyboard.press("Alt+ArrowDown");
    // A pong after the keys shows the page and its connection still work.
    const pongs = await page.evaluate(() => window.grove.stats().pongs);
    await page.waitForFunction((count) => window.grove.stats().pongs > count, pongs, { timeout: 5000 });
    const after = await page.evaluate(() => window.grove.state());
    const shown = await screen(page);

    assert.equal(after.seq, before.seq, "no move was sent");
    assert.deepEqual([after.x, after.y], [before.x, before.y]);
    assert.equal(after.connected, true);
    assert.equal(shown.state, "connected");
    assert.equal(shown.position, `${before.x}, ${before.y}`);
    assert.equal(shown.cells, 17 * 17);

    // And the arrows still work.
    await moveSomewhere(page);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("E seeds a pattern of bacteria in front of the player, Q picks another", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    assert.equal((await page.evaluate(() => window.grove.seeds())).pattern, "glider");

    await page.keyboard.press("e");
    await page.waitForFunction(() => window.grove.seeds().results.length === 1, null, { timeout: 5000 });
    const [answer] = (await page.evaluate(() => window.grove.seeds())).results;
    assert.equal(answer.seq, 1);
    // Where it lands depends on where the player stands: every answer is one the protocol has.
    assert.ok(
      ["ok", "out_of_bounds", "zone_edge", "blocked", "occupied"].includes(answer.result),
      `seed answered ${answer.result}`,
    );
    // The answer is told in words under the numbers.
    await page.waitForFunction(() => document.getElementById("hint").textContent.length > 0);

    await page.keyboard.press("q");
    assert.equal((await page.evaluate(() => window.grove.seeds())).pattern, "blinker");
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("the binary encoding plays too", async () => {
    const { page, problems } = await openGame(browser, `${server.url}?encoding=binary`);
    const state = await waitJoined(page);
    assert.equal(state.encoding, "binary");
    await page.waitForFunction(() => window.grove.state().entities > 0);
    assert.equal((await screen(page)).cells, 17 * 17);

    await moveSomewhere(page);
    // Pong, stats and the minimap arrive in binary as well. The latest stats
    // and minimap come right after the join; waiting for all the actors may
    // take the next stats (every 2 s): the default timeout leaves room for a
    // busy machine, rather than a wait shorter than a broadcast interval.
    await page.waitForFunction(() => window.grove.stats().pongs > 0);
    await page.waitForFunction(() => window.grove.stats().densities > 0);
    await page.waitForFunction(() => window.grove.stats().actors === 2000);
    assert.deepEqual(problems, []);
    await page.close();
  });
});
