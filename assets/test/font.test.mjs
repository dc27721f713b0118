// The same emoji everywhere: the board draws its emoji with the colour font
// the gateway serves (Twemoji, from the npm registry), so a machine with no
// emoji font of its own shows them in colour, not as boxes. Chromium runs
// here with a fontconfig that knows no emoji font at all (at most DejaVu),
// whatever the machine has installed.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openGame, waitJoined } from "./support/browser.mjs";
import { skipReason, startServer } from "./support/server.mjs";

const DEJAVU = "/usr/share/fonts/truetype/dejavu";

/** A fontconfig with no emoji font: DejaVu (when installed) and nothing else. */
function fontconfigWithoutEmoji(dir) {
  const file = join(dir, "fonts.conf");
  writeFileSync(
    file,
    `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  ${existsSync(DEJAVU) ? `<dir>${DEJAVU}</dir>` : ""}
  <cachedir>${join(dir, "cache")}</cachedir>
</fontconfig>
`,
  );
  return file;
}

/**
 * How much of a PNG is in colour: the share of its pixels whose saturation
 * is high (a box, or a plain outline, is drawn in the text's grey ink).
 * The page decodes the image itself, so no PNG library is needed here.
 */
function colourShare(page, png) {
  return page.evaluate(async (base64) => {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext("2d");
    context.drawImage(bitmap, 0, 0);
    const { data } = context.getImageData(0, 0, bitmap.width, bitmap.height);
    let coloured = 0;
    for (let i = 0; i < data.length; i += 4) {
      const max = Math.max(data[i], data[i + 1], data[i + 2]);
      const min = Math.min(data[i], data[i + 1], data[i + 2]);
      if (max > 60 && (max - min) / max > 0.45) coloured++;
    }
    return coloured / (data.length / 4);
  }, png.toString("base64"));
}

// Every cell on a neutral grey, so that whatever colour a screenshot of a
// cell holds is the glyph's own.
const GREY_CELLS = ".cell { background: #808080 !important; }";

describe("the board's emoji font", { skip: skipReason, timeout: 300_000 }, () => {
  let server;
  let browser;
  let fontDir;

  before(async () => {
    fontDir = mkdtempSync(join(tmpdir(), "grove-fonts-"));
    server = await startServer({ actors: 50, width: 100, height: 100 });
    browser = await launchBrowser({ env: { FONTCONFIG_FILE: fontconfigWithoutEmoji(fontDir) } });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    if (fontDir) rmSync(fontDir, { recursive: true, force: true });
  });

  test("is served by the gateway as font/woff2", async () => {
    const { page, problems } = await openGame(browser, server.url);
    const fonts = [];
    page.on("response", (response) => {
      if (response.url().endsWith(".woff2")) fonts.push({ status: response.status(), type: response.headers()["content-type"] });
    });
    await waitJoined(page);
    await page.evaluate(() => document.fonts.ready);
    assert.ok(await page.evaluate(() => document.fonts.check('20px "Grove Emoji"', "😀")), "the font is loaded");
    // Loaded by this page, or by the one before from the cache: either way it came from the gateway.
    const response = await page.evaluate(async () => {
      const rule = [...document.styleSheets].flatMap((sheet) => [...sheet.cssRules]).find((r) => r instanceof CSSFontFaceRule);
      const url = rule.style.getPropertyValue("src").match(/url\("?([^")]+)"?\)/)[1];
      const answer = await fetch(new URL(url, rule.parentStyleSheet.href));
      return { status: answer.status, type: answer.headers.get("content-type"), size: (await answer.arrayBuffer()).byteLength };
    });
    assert.equal(response.status, 200);
    assert.equal(response.type, "font/woff2");
    assert.ok(response.size > 100_000, `${response.size} bytes`);
    for (const font of fonts) assert.deepEqual(font, { status: 200, type: "font/woff2" });
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("draws an emoji cell in colour where the system has no emoji font", async () => {
    const { page, problems } = await openGame(browser, server.url);
    await waitJoined(page);
    await page.evaluate(() => document.fonts.ready);
    await page.addStyleTag({ content: GREY_CELLS });
    const self = page.locator("#viewport .cell.self");
    assert.equal(await self.textContent(), "😀");
    const board = await page.locator("#viewport").screenshot();
    assert.ok(board.byteLength > 0, "the board was captured");

    const withFont = await colourShare(page, await self.screenshot());
    // The same cell drawn by the system's fonts alone: a box or a plain
    // outline in the text's colour. This is what the check must tell apart.
    await page.addStyleTag({ content: '.cell.self { font-family: "DejaVu Sans", sans-serif !important; }' });
    const withoutFont = await colourShare(page, await self.screenshot());

    assert.ok(withFont > 0.15, `with the font, ${(withFont * 100).toFixed(1)} % of the cell is in colour`);
    assert.ok(withoutFont < 0.02, `without it, ${(withoutFont * 100).toFixed(1)} % of the cell is in colour`);
    assert.deepEqual(problems, []);
    await page.close();
  });
});
