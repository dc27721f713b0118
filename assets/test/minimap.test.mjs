// The minimap of a world too large to picture whole, against a real server:
// a world 40 zones a side, told to be too large past 32 (GROVE_MINIMAP_ZONES),
// sends its busiest zones (`places`) instead of a picture of the whole, and
// the minimap draws the 32 x 32 zones around the player, populated ones lit.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openGame, waitJoined } from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

const BACKGROUND = [16, 21, 26];

/** The region the minimap draws, and the colours of chosen pixels, read at one moment. */
function look(page) {
  return page.evaluate((background) => {
    const region = window.grove.minimap();
    const state = window.grove.state();
    const canvas = document.getElementById("minimap");
    const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    const at = (x, y) => Array.from(pixels.slice((y * canvas.width + x) * 4, (y * canvas.width + x) * 4 + 3));
    const { col, row, zones, zoneSize, inside } = region;
    const scale = canvas.width / zones;
    const player = [Math.floor(state.x / zoneSize), Math.floor(state.y / zoneSize)];
    // Zones at least three away from the player's, clear of its view and mark.
    const clear = (c, r) => Math.max(Math.abs(c - player[0]), Math.abs(r - player[1])) >= 3;
    const centre = (c, r) => at((c - col) * scale + scale / 2, (r - row) * scale + scale / 2);
    const lit = inside.filter(([c, r]) => clear(c, r)).map(([c, r]) => centre(c, r));
    const populated = new Set(inside.map(([c, r]) => `${c},${r}`));
    const empty = [];
    for (let r = row; r < row + zones; r++)
      for (let c = col; c < col + zones; c++)
        if (clear(c, r) && !populated.has(`${c},${r}`)) empty.push(centre(c, r));
    const dot = at(
      Math.floor((state.x - col * zoneSize + 0.5) * (scale / zoneSize)),
      Math.floor((state.y - row * zoneSize + 0.5) * (scale / zoneSize)),
    );
    return { region, player, side: [canvas.width, canvas.height], lit, empty, dot, background };
  }, BACKGROUND);
}

describe("the minimap of a world too large to picture whole", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;

  before(async () => {
    server = await startServer({
      actors: 300,
      width: 2000,
      height: 2000,
      env: { GROVE_MINIMAP_ZONES: "32" },
    });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  for (const encoding of ["json", "binary"]) {
    test(`draws the 32 x 32 zones around the player, the populated ones lit (${encoding})`, async () => {
      const { page, problems } = await openGame(browser, `${server.url}?encoding=${encoding}`);
      await waitJoined(page);
      // The actors may come after the first `places` was posted; the next
      // comes within the broadcast interval (10 s): a wait longer than that.
      await page.waitForFunction(() => (window.grove.minimap()?.inside.length ?? 0) > 10, null, { timeout: 60_000 });
      const { region, player, side, lit, empty, dot } = await look(page);

      assert.equal(region.zones, 32);
      assert.equal(region.zoneSize, 50);
      assert.deepEqual(side, [256, 256]);
      // The player's zone is inside the region, which stays inside the world's 40 x 40.
      assert.ok(region.col <= player[0] && player[0] < region.col + 32, JSON.stringify({ region, player }));
      assert.ok(region.row <= player[1] && player[1] < region.row + 32, JSON.stringify({ region, player }));
      assert.ok(region.col >= 0 && region.col <= 8 && region.row >= 0 && region.row <= 8);
      // 300 actors over 1,600 zones: many populated zones around, each lit; the empty ones dark.
      assert.ok(lit.length > 10, `only ${lit.length} populated zones in the region`);
      for (const colour of lit) assert.notDeepEqual(colour, BACKGROUND);
      assert.ok(empty.length > 10);
      for (const colour of empty) assert.deepEqual(colour, BACKGROUND);
      assert.deepEqual(dot, [255, 255, 255]);

      const stats = await page.evaluate(() => window.grove.stats());
      assert.ok(stats.places > 0);
      assert.equal(stats.densities, 0);
      assert.deepEqual(problems, []);
      await page.close();
    });
  }
});
