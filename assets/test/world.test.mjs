// The client's model of its viewport: full views replace, deltas add, move
// and erase, and outcomes (not stale deltas) move the own avatar.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { importSource } from "./support/compile.mjs";

const { WorldModel } = await importSource("world");

const welcome = { type: "welcome", protocol: 1, id: 7, x: 10, y: 10, width: 50, height: 40, view_radius: 8, tick_ms: 100, name: "", avatar: "🙂" };
const view = (full, entities, gone = [], x = 10, y = 10) => ({ type: "view", full, x, y, entities, gone });
const ids = (world) => [...world.entities.keys()].sort((a, b) => a - b);

describe("WorldModel", () => {
  let world;
  beforeEach(() => {
    world = new WorldModel();
    world.applyWelcome(welcome);
  });

  test("a welcome sets the player and the world", () => {
    assert.equal(world.selfId, 7);
    assert.deepEqual([world.x, world.y, world.width, world.height, world.viewRadius], [10, 10, 50, 40, 8]);
  });

  test("a full view replaces everything, a delta adds and moves", () => {
    world.applyView(view(true, [[7, 10, 10, 1], [1, 11, 10, 0], [2, 12, 12, 0]]));
    assert.deepEqual(ids(world), [1, 2, 7]);
    world.applyView(view(false, [[2, 13, 12, 0], [3, 5, 5, 1]]));
    assert.deepEqual(ids(world), [1, 2, 3, 7]);
    assert.deepEqual(world.entities.get(2), { id: 2, x: 13, y: 12, kind: 0 });
    world.applyView(view(true, [[7, 10, 10, 1], [4, 9, 9, 0]]));
    assert.deepEqual(ids(world), [4, 7]);
  });

  test("a delta erases the gone", () => {
    world.applyView(view(true, [[7, 10, 10, 1], [1, 11, 10, 0], [2, 12, 12, 0]]));
    world.applyView(view(false, [], [1, 99]));
    assert.deepEqual(ids(world), [2, 7]);
  });

  test("a full view is centred on the player", () => {
    world.applyView(view(true, [[7, 20, 21, 1]], [], 20, 21));
    assert.deepEqual([world.x, world.y], [20, 21]);
  });

  test("an outcome moves the avatar, a stale delta does not move it back", () => {
    world.applyOutcome({ type: "outcome", seq: 1, result: "ok", x: 11, y: 10 });
    world.applyView(view(false, [[7, 10, 10, 1]]));
    assert.deepEqual([world.x, world.y], [11, 10]);
    assert.equal(world.entityAt(11, 10).id, 7);
    assert.equal(world.entityAt(10, 10), undefined);
  });

  test("a welcome after a reconnect forgets the old viewport", () => {
    world.applyView(view(true, [[7, 10, 10, 1], [1, 11, 10, 0]]));
    world.applyWelcome({ ...welcome, id: 8, x: 30, y: 30 });
    assert.deepEqual(ids(world), []);
    assert.equal(world.selfId, 8);
  });
});
