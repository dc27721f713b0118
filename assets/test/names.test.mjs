// Players meet: each plays under a name (chosen, or made up), the others
// see its avatar and name on the board and in the list of who is nearby,
// and names cross the wire once per player and area, never with moves.
// A small world (8 x 8, one area) where everyone sees everyone.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, moveSomewhere, openGame, waitJoined } from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

// The server's messages of protocol 7 (the page's) are arrays, the tag first.
const TYPES = { 72: "area", 77: "names", 82: "areas" };

/** Every frame a page receives, decoded (the page speaks JSON), by type: names with their fields, areas as they came. */
function recordFrames(page, frames) {
  page.on("websocket", (socket) =>
    socket.on("framereceived", ({ payload }) => {
      const message = JSON.parse(String(payload));
      if (!Array.isArray(message)) return void (frames[message.type] ??= []).push(message);
      const type = TYPES[message[0]];
      if (!type) return;
      const decoded = type === "names" ? { type, area: message[1], names: message[2] } : { type, fields: message.slice(1) };
      (frames[type] ??= []).push(decoded);
    }),
  );
}

/** Changes the name (and avatar) in the panel, as a player would, and waits for the new session. */
async function rename(page, name, avatar) {
  const welcomes = await page.evaluate(() => window.grove.state().welcomes);
  await page.click("#you-edit");
  await page.fill("#you-name-input", name);
  if (avatar) await page.click(`#you-avatars button:text-is("${avatar}")`);
  await page.click('#you-form button[type="submit"]');
  await page.waitForFunction((count) => window.grove.state().welcomes > count && window.grove.state().connected, welcomes);
}

describe("names", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;

  before(async () => {
    server = await startServer({ actors: 4, width: 8, height: 8 });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  // Each in a context of its own: two browsers, two accounts.
  async function player(frames) {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const game = await openGame(context, server.url, undefined, frames && ((page) => recordFrames(page, frames)));
    await waitJoined(game.page);
    return { ...game, context };
  }

  test("a player who chose no name plays under one made up, shown in the panel", async () => {
    const { page, problems, context } = await player();
    const name = await page.locator("#you-name").textContent();
    assert.match(name, /^\S+ \S+$/, `"${name}"`);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the others see a player's avatar and chosen name on the board and in the nearby list", async () => {
    const ada = await player();
    const bo = await player();
    await rename(ada.page, "Ada 🦊", "🦉");
    const adaId = (await ada.page.evaluate(() => window.grove.state())).id;
    assert.equal(await ada.page.locator("#you-name").textContent(), "Ada 🦊");
    assert.equal(await ada.page.locator("#you-avatar").textContent(), "🦉");

    // On Bo's board: her cell with her avatar and her name over it.
    const cell = bo.page.locator(`#viewport .cell.player[data-id="${adaId}"]`);
    await cell.waitFor();
    assert.equal(await cell.textContent(), "🦉");
    assert.equal(await cell.getAttribute("data-name"), "Ada 🦊");
    const label = await cell.evaluate((element) => getComputedStyle(element, "::after").content);
    assert.equal(label, '"Ada 🦊"');

    // And in Bo's list of who is nearby.
    await bo.page.waitForFunction((id) => window.grove.nearby().some((p) => p.id === id), adaId);
    const row = bo.page.locator(`#nearby li[data-id="${adaId}"]`);
    await row.waitFor();
    assert.equal(await row.locator(".name").textContent(), "Ada 🦊");
    assert.equal(await row.locator(".emoji").textContent(), "🦉");
    assert.deepEqual(ada.problems, []);
    assert.deepEqual(bo.problems, []);
    await ada.context.close();
    await bo.context.close();
  });

  test("a name crosses the wire when its player comes into view, never with its moves", async () => {
    // Protocol 5 (the page's) sends deltas as parts of `areas`; an area that shows a game as `area`.
    const frames = { names: [], area: [], areas: [] };
    const watcher = await player(frames);
    const { names } = frames;
    const deltas = () => frames.area.length + frames.areas.length;
    const walker = await player();
    await rename(walker.page, "Walker");
    const id = (await walker.page.evaluate(() => window.grove.state())).id;
    await watcher.page.waitForFunction((walkerId) => window.grove.labelOf(walkerId)?.name === "Walker", id);
    const named = names.filter((frame) => frame.names.some(([entity]) => entity === id)).length;
    assert.ok(named >= 1, "named when it came in");

    // It walks about its area: its moves reach the watcher, its name does not again.
    const deltasBefore = deltas();
    for (let step = 0; step < 5; step++) await moveSomewhere(walker.page);
    const { x, y } = await walker.page.evaluate(() => window.grove.state());
    await watcher.page.waitForFunction(
      ([walkerId, wx, wy]) => window.grove.entities().some((e) => e.id === walkerId && e.x === wx && e.y === wy),
      [id, x, y],
    );
    assert.ok(deltas() > deltasBefore, "its moves came as area deltas");
    assert.equal(names.filter((frame) => frame.names.some(([entity]) => entity === id)).length, named);
    for (const frame of [...frames.area, ...frames.areas]) assert.equal(frame.names, undefined, "an area carries no names");
    await watcher.context.close();
    await walker.context.close();
  });

  test("a name with a control or reordering character is refused, saying why, and play goes on", async () => {
    const { page, problems, context } = await player();
    const before = await page.locator("#you-name").textContent();
    const welcomes = await page.evaluate(() => window.grove.state().welcomes);
    await page.click("#you-edit");
    await page.fill("#you-name-input", "evil\u202Eeman");
    await page.click('#you-form button[type="submit"]');
    await page.waitForFunction(() => /will not do/.test(document.getElementById("hint").textContent));
    assert.match(await page.locator("#hint").textContent(), /U\+202E, a character that reorders the text around it/);
    // Back under the name it had, in a new session.
    await page.waitForFunction((count) => window.grove.state().welcomes > count && window.grove.state().connected, welcomes);
    assert.equal(await page.locator("#you-name").textContent(), before);
    assert.deepEqual(problems, []);
    await context.close();
  });
});
