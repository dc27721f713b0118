// The legend of entity kinds (src/kinds.ts): what each entity is drawn as.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { importSource } from "./support/compile.mjs";

const { Kinds, parseKinds } = await importSource("kinds");

describe("kinds", () => {
  test("an actor kind with an emoji is drawn with it, a player as a player", () => {
    const kinds = new Kinds(parseKinds({ kinds: [{ code: 4, name: "sheep", emoji: "🐑" }] }));
    assert.equal(kinds.draw(4, 17), "🐑");
    assert.equal(kinds.draw(1, 17), "🙂");
    assert.equal(kinds.isPlayer(1), true);
    assert.equal(kinds.isPlayer(4), false);
  });

  test("a kind without an emoji, or one not in the legend, is an actor with a face of its own", () => {
    const kinds = new Kinds(parseKinds({ kinds: [{ code: 3, name: "walker", emoji: "" }] }));
    for (const code of [0, 3, 9]) {
      assert.equal(kinds.draw(code, 3), kinds.draw(0, 3));
      assert.notEqual(kinds.draw(code, 3), "🙂");
      assert.equal(kinds.isPlayer(code), false);
    }
  });

  test("a malformed legend is skipped, not trusted", () => {
    assert.deepEqual(parseKinds(null), []);
    assert.deepEqual(parseKinds({ kinds: [{ code: "4", name: "x", emoji: "" }, { code: 5, name: "y", emoji: "🐐" }] }), [
      { code: 5, name: "y", emoji: "🐐" },
    ]);
  });
});
