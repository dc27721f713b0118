// The page outlives its server: when the server restarts, the page
// reconnects by itself, joins again and shows the world. The page knows the
// server by a relay's address, held for the whole test, so that the new
// server may take any free port and still be where the page looks.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { launchBrowser, moveSomewhere, openGame, screen, waitJoined } from "./support/browser.mjs";
import { startRelay } from "./support/relay.mjs";
import { skipReason, startServer } from "./support/server.mjs";

// Chromium reports each refused reconnection attempt on the console; those
// are expected while the server is down, and nothing else is.
const expectedWhileDown = /WebSocket connection to .* failed|Failed to load resource|ERR_CONNECTION_REFUSED/;

describe("a server restart", { skip: skipReason, timeout: 400_000 }, () => {
  let server;
  let browser;
  let relay;

  after(async () => {
    await browser?.close();
    await server?.stop();
    await relay?.close();
  });

  test("the page reconnects, joins again and shows the world", async () => {
    relay = await startRelay();
    server = await startServer({ actors: 200, width: 100, height: 100 });
    relay.to(server.port);
    browser = await launchBrowser();
    const { page, problems } = await openGame(browser, relay.url);
    const first = await waitJoined(page);
    assert.equal(first.welcomes, 1);

    await server.stop();
    relay.to(null);
    await page.waitForFunction(() => document.getElementById("hud-state").dataset.state === "reconnecting", null, {
      timeout: 15_000,
    });
    assert.equal((await page.evaluate(() => window.grove.state())).connected, false);

    server = await startServer({ actors: 200, width: 100, height: 100 });
    relay.to(server.port);
    await page.waitForFunction(() => window.grove.state().welcomes === 2 && window.grove.state().connected, null, {
      timeout: 30_000,
    });
    await page.waitForFunction(() => window.grove.state().entities > 0);
    const again = await page.evaluate(() => window.grove.state());
    const shown = await screen(page);

    assert.equal(shown.state, "connected");
    assert.equal(shown.cells, 17 * 17);
    assert.equal(shown.selves, 1);
    assert.deepEqual([shown.self.x, shown.self.y], [again.x, again.y]);
    assert.equal(shown.position, `${again.x}, ${again.y}`);
    // The new server's ground, fetched after its welcome.
    await page.waitForFunction(() => window.grove.state().terrainLoaded);

    // And it plays: the new session answers moves.
    await moveSomewhere(page);
    assert.deepEqual(
      problems.filter((problem) => !expectedWhileDown.test(problem)),
      [],
    );
    await page.close();
  });
});
