// The client's model of the areas around it: full areas replace, deltas add,
// move and erase, an entity crossing areas is shown once whichever area
// speaks first, and outcomes (not stale deltas) move the own avatar.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { WorldModel } from "../dist/index.js";

const welcome = {
  type: "welcome",
  protocol: 2,
  id: 7,
  x: 10,
  y: 10,
  width: 50,
  height: 40,
  view_radius: 8,
  tick_ms: 100,
  view_ms: 1000,
  name: "",
  avatar: "🙂",
};
const area = (number, full, entities, gone = []) => ({ type: "area", area: number, full, entities, gone });
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
    assert.equal(world.viewMs, 1000);
  });

  test("a full area replaces what we had of it, a delta adds and moves", () => {
    world.applyArea(area(0, true, [[7, 10, 10, 1], [1, 11, 10, 0], [2, 12, 12, 0]]));
    world.applyArea(area(1, true, [[5, 30, 10, 0]]));
    assert.deepEqual(ids(world), [1, 2, 5, 7]);
    world.applyArea(area(0, false, [[2, 13, 12, 0], [3, 5, 5, 1]]));
    assert.deepEqual(ids(world), [1, 2, 3, 5, 7]);
    assert.deepEqual(world.entities.get(2), { id: 2, x: 13, y: 12, kind: 0 });
    world.applyArea(area(0, true, [[7, 10, 10, 1], [4, 9, 9, 0]]));
    assert.deepEqual(ids(world), [4, 5, 7]);
  });

  test("a delta erases the gone; a delta for an area never shown is ignored", () => {
    world.applyArea(area(0, true, [[7, 10, 10, 1], [1, 11, 10, 0], [2, 12, 12, 0]]));
    world.applyArea(area(0, false, [], [1, 99]));
    world.applyArea(area(3, false, [[8, 1, 1, 0]]));
    assert.deepEqual(ids(world), [2, 7]);
  });

  test("an entity crossing areas is shown once, whichever area speaks first", () => {
    for (const order of ["arrival first", "departure first"]) {
      world.applyArea(area(0, true, [[1, 19, 10, 0]]));
      world.applyArea(area(1, true, []));
      const arrival = area(1, false, [[1, 20, 10, 0]]);
      const departure = area(0, false, [], [1]);
      const steps = order === "arrival first" ? [arrival, departure] : [departure, arrival];
      for (const step of steps) world.applyArea(step);
      assert.deepEqual([...world.entities.values()], [{ id: 1, x: 20, y: 10, kind: 0 }], order);
    }
  });

  test("a closed area takes away only what it alone reported", () => {
    world.applyArea(area(0, true, [[1, 19, 10, 0], [2, 18, 10, 0]]));
    world.applyArea(area(1, true, []));
    world.applyArea(area(1, false, [[1, 20, 10, 0]]));
    world.closeArea(0);
    assert.deepEqual(ids(world), [1]);
  });

  test("an outcome moves the avatar, a stale delta does not move it back", () => {
    world.applyArea(area(0, true, [[7, 10, 10, 1]]));
    world.applyOutcome({ type: "outcome", seq: 1, result: "ok", x: 11, y: 10 });
    world.applyArea(area(0, false, [[7, 10, 10, 1]]));
    assert.deepEqual([world.x, world.y], [11, 10]);
    assert.equal(world.entityAt(11, 10).id, 7);
    assert.equal(world.entityAt(10, 10), undefined);
  });

  test("a welcome after a reconnect, or a resync, forgets the old areas", () => {
    world.applyArea(area(0, true, [[7, 10, 10, 1], [1, 11, 10, 0]]));
    world.applyWelcome({ ...welcome, id: 8, x: 30, y: 30 });
    assert.deepEqual(ids(world), []);
    assert.equal(world.selfId, 8);
    world.applyArea(area(0, true, [[1, 11, 10, 0]]));
    world.forgetAreas();
    assert.deepEqual(ids(world), []);
  });

  test("parts: a delta's entity without its kind keeps the one its area showed; a ground comes once a connection", () => {
    const ground = (number, x) => ({ type: "ground", area: number, x, y: 10, width: 10, height: 10, cells: new Uint8Array(100).fill(1) });
    world.applyGround(ground(1, 10));
    world.applyPart([1, true, [[7, 0, 1], [3, 5, 4]], []]);
    world.applyPart([1, false, [[3, 6, undefined], [9, 7, 5]], []]);
    assert.deepEqual(world.entities.get(3), { id: 3, x: 16, y: 10, kind: 4 });
    assert.deepEqual(world.entities.get(9), { id: 9, x: 17, y: 10, kind: 5 });
    assert.equal(world.groundAt(12, 12), "tree");

    // Closed, the area's ground is kept: its next snapshot comes without one.
    world.closeArea(1);
    assert.equal(world.groundAt(12, 12), undefined, "the ground of an area not held is not drawn");
    world.applyPart([1, true, [[3, 8, 4]], []]);
    assert.deepEqual(world.entities.get(3), { id: 3, x: 18, y: 10, kind: 4 });
    assert.equal(world.groundAt(12, 12), "tree");

    // A delta of an area not held waits for its snapshot; a resync forgets the grounds too.
    world.applyPart([2, false, [[4, 1, 0]], []]);
    assert.equal(world.entities.has(4), false);
    world.forgetAreas();
    world.applyPart([1, true, [[3, 8, 4]], []]);
    assert.equal(world.entities.has(3), false, "no ground, no area: it comes again after a resync");
  });

  test("a game's cells and looks: snapshots replace, deltas change, code 0 clears; looks follow entities", () => {
    const game = (number, full, entities, cells, looks, gone = []) => ({
      ...area(number, full, entities, gone),
      cells,
      looks,
      events: [],
    });
    world.applyArea(game(0, true, [[1, 11, 10, 0]], [[12, 10, 1], [13, 10, 2]], [[1, 2]]));
    assert.equal(world.cellCode(12, 10), 1);
    assert.equal(world.cellCode(13, 10), 2);
    assert.equal(world.lookOf(1), 2);

    world.applyArea(game(0, false, [], [[12, 10, 0], [14, 10, 3]], [[1, 0]]));
    assert.equal(world.cellCode(12, 10), 0);
    assert.equal(world.cellCode(14, 10), 3);
    assert.equal(world.lookOf(1), 0);

    // An entity keeps its look walking into another area; gone, it has none.
    world.applyArea(game(0, false, [], [], [[1, 3]]));
    world.applyArea(game(1, true, [[1, 30, 10, 0]], [], []));
    world.applyArea(game(0, false, [], [], [], [1]));
    assert.equal(world.lookOf(1), 3);
    world.applyArea(game(1, false, [], [], [], [1]));
    assert.equal(world.lookOf(1), 0);

    // A snapshot replaces the area's cells; closing it forgets them.
    world.applyArea(game(0, true, [], [[15, 10, 4]], []));
    assert.equal(world.cellCode(14, 10), 0);
    assert.deepEqual(world.gameCells(), [{ x: 15, y: 10, code: 4 }]);
    world.closeArea(0);
    assert.equal(world.cellCode(15, 10), 0);
  });

  test("areas without game fields (older servers, or none to tell) are read as having none", () => {
    world.applyArea(area(0, true, [[1, 11, 10, 0]]));
    assert.equal(world.cellCode(11, 10), 0);
    assert.deepEqual(world.gameCells(), []);
  });

  describe("names", () => {
    const names = (number, list) => ({ type: "names", area: number, names: list });

    test("come before the snapshot that shows their players, and stay while they move", () => {
      world.applyNames(names(0, [[2, "Ada", "🦊"]]));
      world.applyArea(area(0, true, [[2, 12, 10, 1], [3, 13, 10, 0]]));
      assert.deepEqual(world.labelOf(2), { name: "Ada", avatar: "🦊" });
      assert.equal(world.labelOf(3), undefined, "actors have none");
      world.applyArea(area(0, false, [[2, 12, 11, 1]]));
      assert.deepEqual(world.labelOf(2), { name: "Ada", avatar: "🦊" });
      assert.deepEqual(
        world.nearby().map((player) => [player.id, player.name, player.distance]),
        [[2, "Ada", 2]],
      );
    });

    test("a snapshot that names a player again keeps its name", () => {
      world.applyNames(names(0, [[2, "Ada", "🦊"]]));
      world.applyArea(area(0, true, [[2, 12, 10, 1]]));
      world.applyNames(names(0, [[2, "Ada", "🦊"]]));
      world.applyArea(area(0, true, [[2, 12, 10, 1]]));
      assert.equal(world.labelOf(2).name, "Ada");
    });

    test("go with their player, and come again when it walks into another area, in either order", () => {
      world.applyArea(area(1, true, []));
      world.applyNames(names(0, [[2, "Ada", "🦊"]]));
      world.applyArea(area(0, true, [[2, 19, 10, 1]]));

      // The new area first: named there, then let go by the old one.
      world.applyNames(names(1, [[2, "Ada", "🦊"]]));
      world.applyArea(area(1, false, [[2, 20, 10, 1]]));
      world.applyArea(area(0, false, [], [2]));
      assert.equal(world.labelOf(2).name, "Ada");

      // The old area first: gone, then named again by the new one.
      world.applyArea(area(1, false, [], [2]));
      assert.equal(world.labelOf(2), undefined);
      world.applyNames(names(0, [[2, "Ada", "🦊"]]));
      world.applyArea(area(0, false, [[2, 19, 10, 1]]));
      assert.equal(world.labelOf(2).name, "Ada");
    });

    test("the player's own name is its welcome's", () => {
      assert.deepEqual(world.labelOf(7), { name: "", avatar: "🙂" });
      assert.deepEqual(world.nearby(), []);
    });

    test("names for an area that then closes, or for a delta of an unknown area, are dropped", () => {
      world.applyNames(names(4, [[9, "Bo", "🐻"]]));
      world.closeArea(4);
      world.applyArea(area(4, true, [[9, 12, 12, 1]]));
      assert.equal(world.labelOf(9), undefined);
      world.applyNames(names(5, [[9, "Bo", "🐻"]]));
      world.applyArea(area(5, false, [[9, 12, 12, 1]]));
      world.applyArea(area(5, true, [[9, 12, 12, 1]]));
      assert.equal(world.labelOf(9), undefined);
    });
  });
});
