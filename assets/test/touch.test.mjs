// Playing on a phone: a 390 x 844 touch screen, driven by real touch
// events (chromium's own, through the DevTools protocol), against a real
// server: taps, swipes and holds on the board, and the on-screen pad.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openGame, waitJoined } from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 };
const STEP = { n: [0, -1], ne: [1, -1], e: [1, 0], se: [1, 1], s: [0, 1], sw: [-1, 1], w: [-1, 0], nw: [-1, -1] };

/** Touches through the DevTools protocol: what a finger on a touch screen sends. */
async function fingers(page) {
  const cdp = await page.context().newCDPSession(page);
  const touch = (type, points) => cdp.send("Input.dispatchTouchEvent", { type, touchPoints: points });
  return {
    down: (x, y) => touch("touchStart", [{ x, y, id: 1 }]),
    // Along the way in small steps, as a finger goes.
    move: async (from, to, steps = 6) => {
      for (let i = 1; i <= steps; i++) {
        const x = from[0] + ((to[0] - from[0]) * i) / steps;
        const y = from[1] + ((to[1] - from[1]) * i) / steps;
        await touch("touchMove", [{ x, y, id: 1 }]);
      }
    },
    up: () => touch("touchEnd", []),
  };
}

/** The centre, on screen, of the cell `dx, dy` cells from the avatar's. */
async function cellCentre(page, dx, dy) {
  const box = await page.locator("#viewport .cell.self").boundingBox();
  return [box.x + box.width * (dx + 0.5), box.y + box.height * (dy + 0.5)];
}

/** The directions in which the neighbouring cell looks free, the likeliest first. */
async function freeDirections(page) {
  const { x, y } = await page.evaluate(() => window.grove.state());
  const scored = [];
  for (const [direction, [dx, dy]] of Object.entries(STEP)) {
    const cell = await page.evaluate(([cx, cy]) => window.grove.cellAt(cx, cy), [x + dx, y + dy]);
    scored.push({ direction, free: (cell.terrain === "meadow" || cell.terrain === "flowers") && !cell.entity });
  }
  return scored.sort((a, b) => Number(b.free) - Number(a.free)).map((entry) => entry.direction);
}

/** Waits for the move after `seq` to be answered, and returns it (with its direction). */
async function nextResult(page, seq) {
  const handle = await page.waitForFunction(
    (after) => window.grove.moveResults().find((entry) => entry.seq === after + 1),
    seq,
    { timeout: 5000 },
  );
  return handle.jsonValue();
}

/** Waits for a pong: the page's connection has been round since. */
async function roundTrip(page) {
  const pongs = await page.evaluate(() => window.grove.stats().pongs);
  await page.waitForFunction((count) => window.grove.stats().pongs > count, pongs, { timeout: 5000 });
}

const currentSeq = (page) => page.evaluate(() => window.grove.state().seq);
const directionsSent = (page) => page.evaluate(() => window.grove.moveResults().map((entry) => entry.direction));

describe("on a phone", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;

  before(async () => {
    // Few actors on a large meadow-rich world, so that steps are seldom
    // refused; without a game, whose client would give the pad's button
    // its own action (game.test.mjs tests that).
    server = await startServer({
      actors: 100,
      width: 100,
      height: 100,
      env: { GROVE_GAME: "off" },
    });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function openPhone() {
    const context = await browser.newContext(PHONE);
    const game = await openGame(context, server.url);
    await waitJoined(game.page);
    await game.page.waitForFunction(() => window.grove.state().terrainLoaded && window.grove.state().entities > 0);
    return { ...game, context };
  }

  test("the page fits the screen: the whole board, the pad, no sideways scrolling", async () => {
    const { page, problems, context } = await openPhone();
    const layout = await page.evaluate(() => {
      const board = document.getElementById("viewport").getBoundingClientRect();
      const pad = document.getElementById("pad").getBoundingClientRect();
      return {
        scrollWidth: document.documentElement.scrollWidth,
        board: { left: board.left, right: board.right, bottom: board.bottom },
        pad: { top: pad.top, bottom: pad.bottom, shown: getComputedStyle(document.getElementById("pad")).display !== "none" },
        keysHelp: getComputedStyle(document.querySelector(".help.keys")).display,
      };
    });
    assert.ok(layout.scrollWidth <= 390, `the page is ${layout.scrollWidth} px wide`);
    assert.ok(layout.board.left >= 0 && layout.board.right <= 390, JSON.stringify(layout.board));
    assert.ok(layout.pad.shown, "the pad is shown");
    assert.ok(layout.pad.top >= layout.board.bottom && layout.pad.bottom <= 844, JSON.stringify(layout));
    assert.equal(layout.keysHelp, "none", "no help about keys on a phone");
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("a tap on a neighbouring cell steps onto it", async () => {
    const { page, problems, context } = await openPhone();
    const tried = [];
    for (let attempt = 0; attempt < 20; attempt++) {
      const direction = (await freeDirections(page))[attempt % 8];
      const before = await page.evaluate(() => window.grove.state());
      const [x, y] = await cellCentre(page, ...STEP[direction]);
      await page.touchscreen.tap(x, y);
      const result = await nextResult(page, before.seq);
      assert.equal(result.direction, direction, "the step goes toward the tapped cell");
      tried.push(`${direction}: ${result.result}`);
      if (result.result !== "ok") continue;
      const after = await page.evaluate(() => window.grove.state());
      assert.deepEqual([after.x, after.y], [before.x + STEP[direction][0], before.y + STEP[direction][1]]);
      assert.deepEqual(problems, []);
      await context.close();
      return;
    }
    assert.fail(`no tap moved the avatar: ${tried.join(", ")}`);
  });

  test("a tap on a far cell steps toward it", async () => {
    const { page, problems, context } = await openPhone();
    const seq = await currentSeq(page);
    // Five cells east and one south: east is the nearest of the eight ways.
    const [x, y] = await cellCentre(page, 5, 1);
    await page.touchscreen.tap(x, y);
    assert.equal((await nextResult(page, seq)).direction, "e");
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("a swipe walks the way it goes, on while the finger stays down, and stops when it lifts", async () => {
    const { page, problems, context } = await openPhone();
    const finger = await fingers(page);
    const seq = await currentSeq(page);
    // From the cell west of the avatar, sweeping on west. (Started there,
    // a swipe the page is too busy to tell from a hold still walks west.)
    const start = await cellCentre(page, -1, 0);
    await finger.down(...start);
    const heldFrom = Date.now();
    await finger.move(start, [start[0] - 80, start[1] + 6]);
    await page.waitForFunction((from) => window.grove.state().seq >= from + 4, seq, { timeout: 10_000 });
    await finger.up();
    const heldMs = Date.now() - heldFrom;
    const walked = (await currentSeq(page)) - seq;

    const sent = (await directionsSent(page)).slice(-walked);
    assert.ok(sent.every((direction) => direction === "w"), sent.join(", "));
    // One step at the swipe, then one per repeat: never faster than the keyboard's.
    assert.ok(walked <= 2 + heldMs / 100, `${walked} steps in ${heldMs} ms`);
    const results = await page.evaluate(() => window.grove.moveResults().map((entry) => entry.result));
    assert.ok(!results.includes("rate_limited"), results.join(", "));

    // Lifted: no more steps.
    const stopped = await currentSeq(page);
    await roundTrip(page);
    assert.equal(await currentSeq(page), stopped);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("a finger held still on a cell walks toward it until it lifts", async () => {
    const { page, problems, context } = await openPhone();
    const finger = await fingers(page);
    const seq = await currentSeq(page);
    // Three cells south: the avatar walks south, and the board, which keeps
    // it in the middle, keeps that cell three cells ahead of it.
    await finger.down(...(await cellCentre(page, 0, 3)));
    await page.waitForFunction((from) => window.grove.state().seq >= from + 3, seq, { timeout: 10_000 });
    await finger.up();
    const walked = (await currentSeq(page)) - seq;
    const sent = (await directionsSent(page)).slice(-walked);
    assert.ok(walked >= 3);
    assert.ok(sent.every((direction) => direction === "s"), sent.join(", "));

    const stopped = await currentSeq(page);
    await roundTrip(page);
    assert.equal(await currentSeq(page), stopped);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the pad's arrows step, and walk while held", async () => {
    const { page, problems, context } = await openPhone();
    const tried = [];
    let stepped = false;
    for (let attempt = 0; attempt < 20 && !stepped; attempt++) {
      const direction = (await freeDirections(page))[attempt % 8];
      const before = await page.evaluate(() => window.grove.state());
      await page.locator(`#pad [data-dir="${direction}"]`).tap();
      const result = await nextResult(page, before.seq);
      assert.equal(result.direction, direction);
      tried.push(`${direction}: ${result.result}`);
      stepped = result.result === "ok";
    }
    assert.ok(stepped, `no arrow moved the avatar: ${tried.join(", ")}`);

    // Held: it keeps walking, then stops when let go.
    const finger = await fingers(page);
    const seq = await currentSeq(page);
    const box = await page.locator('#pad [data-dir="n"]').boundingBox();
    await finger.down(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForFunction((from) => window.grove.state().seq >= from + 3, seq, { timeout: 10_000 });
    await finger.up();
    const walked = (await currentSeq(page)) - seq;
    assert.ok((await directionsSent(page)).slice(-walked).every((direction) => direction === "n"));
    const stopped = await currentSeq(page);
    await roundTrip(page);
    assert.equal(await currentSeq(page), stopped);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("acting needs no keyboard: the pad's middle button seeds, its pattern button picks, a tap on the avatar seeds", async () => {
    const { page, problems, context } = await openPhone();
    await page.locator("#pad .pad-act").tap();
    await page.waitForFunction(() => window.grove.seeds().results.length === 1, null, { timeout: 5000 });
    assert.equal((await page.evaluate(() => window.grove.seeds())).results[0].seq, 1);

    await page.locator("#pad .pad-extra", { hasText: "glider" }).tap();
    assert.equal((await page.evaluate(() => window.grove.seeds())).pattern, "blinker");
    assert.match(await page.locator("#pad .pad-extra").first().textContent(), /blinker/);

    const [x, y] = await cellCentre(page, 0, 0);
    await page.touchscreen.tap(x, y);
    await page.waitForFunction(() => window.grove.seeds().results.length === 2, null, { timeout: 5000 });
    assert.equal(await currentSeq(page), 0, "no step was taken");
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("on a desktop the pad stays hidden, and a click on a cell steps toward it", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    assert.equal(await page.evaluate(() => getComputedStyle(document.getElementById("pad")).display), "none");
    const seq = await currentSeq(page);
    const [x, y] = await cellCentre(page, -3, 0);
    await page.mouse.click(x, y);
    assert.equal((await nextResult(page, seq)).direction, "w");
    assert.deepEqual(problems, []);
    await page.close();
  });
});
