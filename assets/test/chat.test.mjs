// Nearby chat in the browser, against a real server: a line typed and
// said shows in the log of those around and as a bubble over the speaker,
// typing never walks or seeds, a muted player's lines stop showing, lines
// too fast are refused with the reason, the operator's announcement shows
// on every page; and on a phone (390 x 844, real touch events) the chat
// is one tap away.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openGame, waitJoined } from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

const ADMIN_TOKEN = "browser-chat-admin-token-7d2e";
const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 };

const chatOf = (page) => page.evaluate(() => window.grove.chat());

/** Waits until the page's chat log has a line that `pred` (run in the page) accepts. */
async function waitLine(page, text, kind = "line") {
  await page.waitForFunction(
    ([wanted, wantedKind]) => window.grove.chat().entries.some((entry) => entry.text === wanted && entry.kind === wantedKind),
    [text, kind],
    { timeout: 10_000 },
  );
}

/** Says a line through the page's input, as a player with a keyboard does, and waits for its answer. */
async function sayTyped(page, text) {
  const answers = (await chatOf(page)).answers.length;
  await page.keyboard.press("/");
  await page.waitForFunction(() => document.activeElement?.id === "chat-input");
  assert.equal(await page.inputValue("#chat-input"), "", "the / opens the chat, and is not typed");
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
  await page.waitForFunction((count) => window.grove.chat().answers.length > count, answers);
  return (await chatOf(page)).answers.at(-1);
}

describe("chat", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;

  before(async () => {
    // One small area: everyone sees everyone.
    server = await startServer({
      actors: 4,
      width: 8,
      height: 8,
      env: { GROVE_ADMIN_TOKEN: ADMIN_TOKEN, GROVE_GAME: "off" },
    });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function player(options = { viewport: { width: 1200, height: 900 } }) {
    const context = await browser.newContext(options);
    const game = await openGame(context, server.url);
    await waitJoined(game.page);
    return { ...game, context };
  }

  test("a typed line shows in the log of those around and as a bubble over the speaker", async () => {
    const ada = await player();
    const bo = await player();
    const adaId = (await ada.page.evaluate(() => window.grove.state())).id;
    const before = await ada.page.evaluate(() => ({ seq: window.grove.state().seq, seeds: window.grove.seeds().results.length }));

    // "wasd" and "e" are keys of the game: typed into the field, they are text.
    const answer = await sayTyped(ada.page, "wasd, east and seeds");
    assert.equal(answer.result, "ok");
    await waitLine(bo.page, "wasd, east and seeds");
    await waitLine(ada.page, "wasd, east and seeds");
    const after = await ada.page.evaluate(() => ({ seq: window.grove.state().seq, seeds: window.grove.seeds().results.length }));
    assert.deepEqual(after, before, "typing neither walked nor seeded");
    assert.equal(await ada.page.inputValue("#chat-input"), "", "the input is emptied once said");

    // Bo sees who said it, in the log and over Ada's avatar.
    const seen = await chatOf(bo.page);
    const line = seen.entries.find((entry) => entry.text === "wasd, east and seeds");
    const adaName = (await ada.page.locator("#you-name").textContent()).trim();
    assert.equal(line.id, adaId);
    assert.equal(line.name, adaName);
    assert.equal(line.self, false);
    await bo.page.waitForFunction(
      (id) => window.grove.chat().bubbles.some((bubble) => bubble.id === id && bubble.text === "wasd, east and seeds"),
      adaId,
    );
    const bubble = bo.page.locator(`#viewport .bubble[data-id="${adaId}"]`);
    assert.equal(await bubble.textContent(), "wasd, east and seeds");
    assert.ok(await bubble.isVisible());
    // Ada's own line says "You".
    const own = (await chatOf(ada.page)).entries.find((entry) => entry.text === "wasd, east and seeds");
    assert.equal(own.self, true);
    assert.equal(own.name, "You");

    assert.deepEqual(ada.problems, []);
    assert.deepEqual(bo.problems, []);
    await ada.context.close();
    await bo.context.close();
  });

  test("a muted player's lines stop showing; unmuted, they show again", async () => {
    const ada = await player();
    const bo = await player();
    const adaId = (await ada.page.evaluate(() => window.grove.state())).id;

    assert.equal((await sayTyped(ada.page, "first")).result, "ok");
    await waitLine(bo.page, "first");
    await bo.page.click(`#chat-log li[data-id="${adaId}"] button.mute`);
    assert.equal(await bo.page.locator(`#chat-log li[data-id="${adaId}"]`).count(), 0, "her lines leave the log");
    assert.deepEqual((await chatOf(bo.page)).muted, [adaId]);

    // Bo's own line, said after Ada's was answered, comes with hers or after it.
    assert.equal((await sayTyped(ada.page, "you cannot hear me")).result, "ok");
    assert.equal((await sayTyped(bo.page, "marker")).result, "ok");
    await waitLine(bo.page, "marker");
    const texts = (await chatOf(bo.page)).entries.map((entry) => entry.text);
    assert.ok(!texts.includes("you cannot hear me"), texts.join(" | "));
    assert.equal(await bo.page.locator(`#viewport .bubble[data-id="${adaId}"]`).count(), 0);

    await bo.page.click(`#chat-muted button[data-id="${adaId}"]`);
    assert.deepEqual((await chatOf(bo.page)).muted, []);
    assert.equal((await sayTyped(ada.page, "and now?")).result, "ok");
    await waitLine(bo.page, "and now?");

    assert.deepEqual(ada.problems, []);
    assert.deepEqual(bo.problems, []);
    await ada.context.close();
    await bo.context.close();
  });

  test("lines faster than the limit are refused, saying so, and kept in the input", async () => {
    const { page, problems, context } = await player();
    // Eight lines at one a second, bursts of three, would take five seconds
    // to pass. They are said from the page in one go, as a player's form
    // sends them: typed one by one from here, each fill and press a round
    // trip to the browser, a loaded machine spread them over more than the
    // five seconds and none was refused.
    await page.evaluate(() => {
      const input = document.getElementById("chat-input");
      for (let n = 1; n <= 8; n++) {
        input.value = `line ${n}`;
        input.form.requestSubmit();
      }
    });
    await page.waitForFunction(() => window.grove.chat().answers.length === 8);
    const { answers } = await chatOf(page);
    assert.ok(answers.some((answer) => answer.result === "rate_limited"), JSON.stringify(answers));
    assert.ok(answers.every((answer) => answer.result === "ok" || answer.result === "rate_limited"));
    // The last line, refused, stays in the input (an earlier line's answer
    // that came after it does not clear what the player typed since).
    assert.equal(await page.inputValue("#chat-input"), "line 8");
    // A refusal answers at once, a line said after the world heard it: the
    // page's status is the answer that came last.
    if (answers.at(-1).result === "rate_limited")
      assert.equal(await page.locator("#chat-status").textContent(), "Not so fast: one line a second.");
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the operator's announcement shows on every page", async () => {
    const ada = await player();
    const bo = await player();
    const response = await fetch(new URL("/api/admin/announce", server.url), {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "The grove closes in five minutes" }),
    });
    assert.equal(response.status, 202);
    for (const { page } of [ada, bo]) {
      await waitLine(page, "The grove closes in five minutes", "announcement");
      assert.equal(await page.locator("#chat-log li.announcement .text").last().textContent(), "The grove closes in five minutes");
    }
    assert.deepEqual(ada.problems, []);
    assert.deepEqual(bo.problems, []);
    await ada.context.close();
    await bo.context.close();
  });

  test("on a phone, the pad's chat button opens the input, and a tap on Say says it", async () => {
    const { page, problems, context } = await player(PHONE);
    const id = (await page.evaluate(() => window.grove.state())).id;
    const chatButton = page.locator('#pad button[title="Say something to the players around you"]');
    assert.ok(await chatButton.isVisible(), "the pad has a chat button");

    await chatButton.scrollIntoViewIfNeeded();
    const box = await chatButton.boundingBox();
    await page.touchscreen.tap(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForFunction(() => document.activeElement?.id === "chat-input");
    const input = await page.locator("#chat-input").boundingBox();
    assert.ok(input.y >= 0 && input.y + input.height <= 844, `the input is on screen: ${JSON.stringify(input)}`);
    assert.ok(input.x >= 0 && input.x + input.width <= 390, `the input fits the width: ${JSON.stringify(input)}`);

    // What a phone's keyboard gives: text, then a tap on Say.
    await page.keyboard.insertText("hello from a phone");
    const say = await page.locator('#chat-form button[type="submit"]').boundingBox();
    await page.touchscreen.tap(say.x + say.width / 2, say.y + say.height / 2);
    await waitLine(page, "hello from a phone");
    await page.waitForFunction((self) => window.grove.chat().bubbles.some((bubble) => bubble.id === self), id);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `the page is ${width} px wide`);
    assert.deepEqual(problems, []);
    await context.close();
  });
});
