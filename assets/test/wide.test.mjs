// Worlds wider than protocol version 2 can say (70,000 cells, past 16 bits;
// a million cells a side, 400 million zones), whose zones start on demand
// (asked for, or chosen by the server for a world of more zones than can
// all run), played in a headless chromium against a real server: the page
// speaks version 3, draws the ground each area brought (the whole world's
// is never sent), and walks.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, moveSomewhere, openGame, screen, waitAreasGround, waitJoined } from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

const worlds = [
  { title: "a world past 16 bits, zones on demand", width: 70_000, height: 70, env: { GROVE_ZONES: "on_demand" } },
  // No GROVE_ZONES: the server starts the zones of a world this large on demand by itself.
  { title: "a world a million cells a side", width: 1_000_000, height: 1_000_000, env: { GROVE_ZONES: null } },
];

for (const world of worlds) {
  describe(world.title, { skip: skipReason, timeout: 300_000 }, () => {
    let server;
    let browser;

    before(async () => {
      server = await startServer({
        actors: 20,
        width: world.width,
        height: world.height,
        env: world.env,
      });
      browser = await launchBrowser();
    });

    after(async () => {
      await browser?.close();
      await server?.stop();
    });

    test("the page joins in protocol 7, draws each area's ground and walks", async () => {
      const { page, problems } = await openGame(browser, server.url);
      const state = await waitJoined(page);
      assert.equal(state.protocol, 7);
      assert.equal(state.width, world.width);
      assert.equal(state.height, world.height);

      // No whole terrain for a world this size (the page does not ask for
      // it): the ground comes with the areas.
      assert.equal(state.wholeTerrain, false);
      assert.equal(state.terrainLoaded, false);
      await waitAreasGround(page);
      const shown = await screen(page);
      assert.equal(shown.cells, 17 * 17);
      assert.equal(shown.position, `${state.x}, ${state.y}`);

      const step = await moveSomewhere(page);
      assert.equal(step.result, "ok");
      const moved = await page.evaluate(() => window.grove.state());
      assert.notDeepEqual([moved.x, moved.y], [state.x, state.y]);
      await page.waitForFunction(
        ([x, y]) => document.getElementById("hud-position").textContent === `${x}, ${y}`,
        [moved.x, moved.y],
      );
      assert.deepEqual(problems, []);
      await page.close();
    });
  });
}
