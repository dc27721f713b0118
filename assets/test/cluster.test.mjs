// One world on three nodes, played in a headless chromium: three server OS
// processes (scripts/test-server) joined into a cluster, a page connected
// to each. Two players stand on either side of a zone border whose zones
// run on different nodes, each connected to the node of its own zone, so
// that each sees the other only through its node's relay of the other
// zone's deltas; the third page, on the third node, watches both zones
// from afar. Each page must show the others where they stand, and follow
// them when they move.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ARROWS, launchBrowser, openGame, pressForOutcome, screen, waitJoined } from "./support/browser.mjs";
import { clusterSeenBy, clusterSkipReason, startCluster, waitForCluster } from "./support/cluster.mjs";
import { skipReason } from "./support/server.mjs";

// Nine zones of 50 x 50 cells (the default zone size) on three nodes: a
// border between zones of different nodes exists unless one node holds all
// nine, and no player is far from one. The same test runs on another world
// when asked, as docs/benchmarks.md does with the default world and 20,000
// actors: GROVE_CLUSTER_TEST_WIDTH, GROVE_CLUSTER_TEST_HEIGHT and
// GROVE_CLUSTER_TEST_ACTORS (in all, shared by the nodes).
const WIDTH = Number(process.env.GROVE_CLUSTER_TEST_WIDTH ?? 150);
const HEIGHT = Number(process.env.GROVE_CLUSTER_TEST_HEIGHT ?? 150);
const ACTORS = Number(process.env.GROVE_CLUSTER_TEST_ACTORS ?? 0);
// Players are drawn with their avatar: a guest's is 😀.
const PLAYER = "😀";
const guestLogin = /^console error: Failed to load resource: the server responded with a status of 404/;
const blocking = new Set(["tree", "rock", "water"]);
const steps = { n: [0, -1], e: [1, 0], s: [0, 1], w: [-1, 0] };

describe("a cluster of three nodes", { skip: skipReason || clusterSkipReason, timeout: 600_000 }, () => {
  let cluster;
  let layout;
  let browser;

  before(async () => {
    cluster = await startCluster({ size: 3, width: WIDTH, height: HEIGHT, actors: ACTORS, env: { GROVE_LIFE: "off", GROVE_GAME: "off" } });
    layout = await waitForCluster(cluster.nodes);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await cluster?.stop();
  });

  test("players on different nodes see each other across a border between zones of different nodes, and see each other move", async () => {
    const { nodes } = cluster;
    const games = [];
    for (const node of nodes) games.push({ node, ...(await openGame(browser, node.url)) });
    for (const game of games) {
      game.state = await waitJoined(game.page, 30_000);
      await game.page.waitForFunction(() => window.grove.state().terrainLoaded, null, { timeout: 30_000 });
    }
    assert.equal(new Set(games.map((game) => game.state.id)).size, 3, "three players");
    for (const game of games) assert.deepEqual([game.state.width, game.state.height], [WIDTH, HEIGHT]);

    const ground = await passableGround(games[0].page);
    const owner = ([x, y]) => layout.placement[zoneOf(x, y)];
    const plan = meetingPlan(ground, layout.placement, games);
    const [a, b, c] = plan.roles;
    // Each of the two stands in a zone its own node runs, next to a zone of the other's node.
    assert.equal(owner(plan.cells.a), a.node.name);
    assert.equal(owner(plan.cells.b), b.node.name);
    assert.notEqual(a.node.name, b.node.name);
    assert.notEqual(c.node.name, a.node.name);
    assert.notEqual(c.node.name, b.node.name);

    await Promise.all([
      walkTo(a.page, plan.cells.a, ground),
      walkTo(b.page, plan.cells.b, ground),
      walkTo(c.page, plan.cells.c, ground),
    ]);

    // Each page shows the two others on their cells, as players.
    for (const viewer of plan.roles) {
      for (const other of plan.roles) {
        if (other === viewer) continue;
        await waitShows(viewer.page, other.state.id, plan.cells[other.role]);
      }
    }

    // The dashboard data agrees: each node has one session, three players in all.
    await eventually(async () => {
      const { cluster: seen } = await clusterSeenBy(nodes[0]);
      assert.deepEqual(
        seen.members.map((member) => member.sessions),
        [1, 1, 1],
      );
      assert.equal(seen.members.reduce((sum, member) => sum + member.players, 0), 3);
      // The actors, every one in the world, in zones of every node.
      assert.equal(seen.members.reduce((sum, member) => sum + member.actors, 0), ACTORS);
      if (ACTORS > 0) assert.ok(seen.members.every((member) => member.actors > 0), "actors in every node's zones");
      const perNode = seen.members.map((member) => `${member.node}: ${member.zones} zones, ${member.actors} actors`);
      console.log(`${WIDTH} x ${HEIGHT}; ${perNode.join("; ")}`);
    });

    // One of the two steps; then the other: every other page follows.
    for (const [mover, from] of [
      [b, plan.cells.b],
      [a, plan.cells.a],
    ]) {
      const taken = new Set(plan.roles.map((role) => key(plan.cells[role.role])));
      const to = await stepAside(mover.page, from, ground, taken);
      plan.cells[mover.role] = to;
      for (const viewer of plan.roles) {
        if (viewer !== mover) await waitShows(viewer.page, mover.state.id, to, from);
      }
    }

    for (const game of games) {
      const shown = await screen(game.page);
      assert.equal(shown.state, "connected");
      assert.equal(shown.selves, 1);
      // Without accounts the device login is answered 404 and the page plays
      // as a guest: chromium reports that answer on the console.
      const unexpected = game.problems.filter((problem) => !guestLogin.test(problem));
      assert.deepEqual(unexpected, [], `${game.node.name}'s page`);
      await game.page.close();
    }
    for (const node of nodes) {
      const login = await fetch(new URL("/api/device_login", node.url), { method: "POST", body: "{}" });
      assert.equal(login.status, 404, "no accounts: every player a guest");
      assert.ok(!node.output().includes(cluster.cookie), `${node.name}'s output shows the cookie`);
      assert.doesNotMatch(node.output(), /refused/, `${node.name}'s output`);
    }
  });
});

const key = ([x, y]) => y * WIDTH + x;
const zoneOf = (x, y) => Math.floor(y / 50) * Math.ceil(WIDTH / 50) + Math.floor(x / 50);

// Which cells can be walked on: the terrain every page loads alike.
function passableGround(page) {
  return page.evaluate(
    ([width, height, kinds]) => {
      const cells = [];
      for (let y = 0; y < height; y++) {
        for (let x = 0; x < width; x++) {
          const terrain = window.grove.cellAt(x, y).terrain;
          cells.push(terrain !== undefined && !kinds.includes(terrain) ? 1 : 0);
        }
      }
      return cells;
    },
    [WIDTH, HEIGHT, [...blocking]],
  );
}

// Steps from a cell to every cell reachable from it (-1: unreachable).
function distances(ground, [x0, y0], avoid = new Set()) {
  const distance = new Int32Array(WIDTH * HEIGHT).fill(-1);
  const queue = [[x0, y0]];
  distance[key([x0, y0])] = 0;
  for (let head = 0; head < queue.length; head++) {
    const [x, y] = queue[head];
    for (const [dx, dy] of Object.values(steps)) {
      const [nx, ny] = [x + dx, y + dy];
      if (nx < 0 || ny < 0 || nx >= WIDTH || ny >= HEIGHT) continue;
      const at = key([nx, ny]);
      if (!ground[at] || distance[at] !== -1 || avoid.has(at)) continue;
      distance[at] = distance[key([x, y])] + 1;
      queue.push([nx, ny]);
    }
  }
  return distance;
}

/**
 * Where the three players should stand, and who is who: `a` and `b` on
 * neighbouring cells across a border between zones of different nodes,
 * each the player connected to the node of its own cell's zone; `c`, the
 * player of the third node, within three cells of both. The choice that
 * makes the longest walk shortest.
 */
function meetingPlan(ground, placement, games) {
  const byNode = new Map(games.map((game) => [game.node.name, game]));
  const reach = new Map(games.map((game) => [game, distances(ground, [game.state.x, game.state.y])]));
  let best = null;
  for (let y = 0; y < HEIGHT; y++) {
    for (let x = 0; x < WIDTH; x++) {
      for (const [dx, dy] of [steps.e, steps.s]) {
        const [bx, by] = [x + dx, y + dy];
        if (bx >= WIDTH || by >= HEIGHT || !ground[key([x, y])] || !ground[key([bx, by])]) continue;
        const [ownerA, ownerB] = [placement[zoneOf(x, y)], placement[zoneOf(bx, by)]];
        if (ownerA === ownerB) continue;
        const [a, b] = [byNode.get(ownerA), byNode.get(ownerB)];
        const c = games.find((game) => game !== a && game !== b);
        const [toA, toB] = [reach.get(a)[key([x, y])], reach.get(b)[key([bx, by])]];
        if (toA < 0 || toB < 0) continue;
        let watch = null;
        for (let cy = y - 3; cy <= y + 3; cy++) {
          for (let cx = x - 3; cx <= x + 3; cx++) {
            if (cx < 0 || cy < 0 || cx >= WIDTH || cy >= HEIGHT || !ground[key([cx, cy])]) continue;
            if (Math.max(Math.abs(cx - bx), Math.abs(cy - by)) > 3) continue;
            if ((cx === x && cy === y) || (cx === bx && cy === by)) continue;
            const toC = reach.get(c)[key([cx, cy])];
            if (toC >= 0 && (watch === null || toC < watch.steps)) watch = { cell: [cx, cy], steps: toC };
          }
        }
        if (watch === null) continue;
        const cost = Math.max(toA, toB, watch.steps);
        if (best === null || cost < best.cost) {
          best = { cost, cells: { a: [x, y], b: [bx, by], c: watch.cell }, a, b, c };
        }
      }
    }
  }
  assert.ok(best, `no border between zones of different nodes within reach (placement ${placement.join(", ")})`);
  best.a.role = "a";
  best.b.role = "b";
  best.c.role = "c";
  return { cells: best.cells, roles: [best.a, best.b, best.c] };
}

// Walks the player to a cell along a shortest path, around players in the way.
// The distances are computed again only when someone stands in the way.
async function walkTo(page, target, ground, maxMoves = 2000) {
  const avoid = new Set();
  let toTarget = distances(ground, target);
  for (let moves = 0; moves < maxMoves; moves++) {
    const { x, y } = await page.evaluate(() => window.grove.state());
    if (x === target[0] && y === target[1]) return;
    if (toTarget[key([x, y])] < 0 && avoid.size > 0) {
      avoid.clear();
      toTarget = distances(ground, target);
    }
    const here = toTarget[key([x, y])];
    assert.ok(here > 0, `no way from ${x},${y} to ${target}`);
    const [direction, next] = Object.entries(steps)
      .map(([name, [dx, dy]]) => [name, [x + dx, y + dy]])
      .find(([, [nx, ny]]) => nx >= 0 && ny >= 0 && nx < WIDTH && ny < HEIGHT && toTarget[key([nx, ny])] === here - 1);
    const outcome = await pressForOutcome(page, ARROWS[direction], 15_000);
    if (outcome.result === "ok") continue;
    // Someone stands there: around them, unless it is the target itself.
    if (outcome.result === "occupied" && key(next) !== key(target)) {
      avoid.add(key(next));
      toTarget = distances(ground, target, avoid);
    } else if (!["occupied", "rate_limited", "busy", "interrupted"].includes(outcome.result)) {
      assert.fail(`a move from ${x},${y} toward ${target} was refused: ${outcome.result}`);
    }
  }
  assert.fail(`did not reach ${target} in ${maxMoves} moves`);
}

// One step to a free neighbouring cell; resolves with the cell.
async function stepAside(page, [x, y], ground, taken) {
  for (const [direction, [dx, dy]] of Object.entries(steps)) {
    const to = [x + dx, y + dy];
    if (to[0] < 0 || to[1] < 0 || to[0] >= WIDTH || to[1] >= HEIGHT || !ground[key(to)] || taken.has(key(to))) continue;
    const outcome = await pressForOutcome(page, ARROWS[direction], 15_000);
    if (outcome.result === "ok") return to;
  }
  assert.fail(`no step from ${x},${y} was taken`);
}

// Waits until the page shows the player `id` at `cell` (and no longer at `from`).
async function waitShows(page, id, cell, from = null) {
  try {
    await page.waitForFunction(
      ([id, [x, y], from, emoji]) => {
        const at = ([cx, cy]) => document.querySelector(`#viewport .cell[data-x="${cx}"][data-y="${cy}"]`);
        const shown = at([x, y]);
        const there = shown?.dataset.id === String(id) && shown.classList.contains("player") && shown.textContent === emoji;
        return there && (from === null || at(from)?.dataset.id !== String(id));
      },
      [id, cell, from, PLAYER],
      { timeout: 30_000 },
    );
  } catch (error) {
    const entities = await page.evaluate(() => window.grove.entities());
    throw new Error(`the page does not show player ${id} at ${cell}; it knows ${JSON.stringify(entities)}`, {
      cause: error,
    });
  }
}

// Retries an assertion until it holds, for state that settles over a few ticks.
async function eventually(check, { timeoutMs = 30_000, intervalMs = 250 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolveWait) => setTimeout(resolveWait, intervalMs));
    }
  }
}
