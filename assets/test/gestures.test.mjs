// Which way a tap or a swipe points: the eight directions from a vector on screen.
import assert from "node:assert/strict";
import { test } from "node:test";
import { importSource } from "./support/compile.mjs";

const { directionOf } = await importSource("touch");

test("a vector points to the nearest of the eight directions, y growing down", () => {
  const cases = [
    [[1, 0], "e"],
    [[0, -1], "n"],
    [[0, 1], "s"],
    [[-1, 0], "w"],
    [[1, -1], "ne"],
    [[3, 3], "se"],
    [[-2, 2], "sw"],
    [[-1, -1], "nw"],
    // A cell five east and one south is east; two east and two south, south-east.
    [[5, 1], "e"],
    [[1, 5], "s"],
    [[-5, -2], "w"],
    [[2, -5], "n"],
  ];
  for (const [[dx, dy], expected] of cases) assert.equal(directionOf(dx, dy), expected, `${dx}, ${dy}`);
});

test("no vector has no direction", () => {
  assert.equal(directionOf(0, 0), undefined);
});

test("every angle maps to one direction, each over an eighth of the turn", () => {
  const counts = {};
  for (let degree = 0; degree < 360; degree++) {
    const angle = ((degree + 0.5) * Math.PI) / 180;
    const direction = directionOf(Math.cos(angle), Math.sin(angle));
    counts[direction] = (counts[direction] ?? 0) + 1;
  }
  assert.deepEqual(Object.keys(counts).sort(), ["e", "n", "ne", "nw", "s", "se", "sw", "w"]);
  for (const count of Object.values(counts)) assert.equal(count, 45);
});
