// The operators' dashboard at /dashboard: its data handling in node, then
// the page in a headless chromium against a real server (scripts/test-server)
// started with an admin token, as operators run it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openGame, waitJoined } from "./support/browser.mjs";
import { importSource } from "./support/compile.mjs";
import { skipReason, startServer, TEST_SERVER } from "./support/server.mjs";

const data = await importSource("dashboard/data");
const poller = await importSource("dashboard/poller");

/** A sample at t with every field at `value` (or as given). */
function sample(t, fields = {}) {
  const s = { t, load_run: null };
  for (const field of data.NUMERIC_FIELDS) s[field] = 1;
  return { ...s, ...fields };
}

const ts = (samples) => samples.map((s) => s.t);

describe("dashboard data handling", () => {
  test("new samples are appended; repeats and stragglers merge in order, one per t", () => {
    const history = [sample(1000), sample(2000), sample(3000)];
    const appended = data.mergeSamples(history, [sample(4000), sample(5000)]);
    assert.deepEqual(ts(appended), [1000, 2000, 3000, 4000, 5000]);
    assert.deepEqual(ts(history), [1000, 2000, 3000], "the history given is not changed");

    const overlap = data.mergeSamples(history, [sample(5000), sample(3000, { moves_per_s: 7 }), sample(2500)]);
    assert.deepEqual(ts(overlap), [1000, 2000, 2500, 3000, 5000]);
    assert.equal(overlap[3].moves_per_s, 7, "a repeated t takes the newer copy");

    assert.deepEqual(ts(data.mergeSamples([], [sample(2000), sample(1000), sample(2000)])), [1000, 2000]);
    assert.deepEqual(ts(data.mergeSamples(history, [])), [1000, 2000, 3000]);
  });

  test("the history is capped at an hour before the newest sample", () => {
    const hour = [];
    for (let i = 0; i < 3600; i++) hour.push(sample(1_000_000 + i * 1000));
    const more = data.mergeSamples(hour, [sample(1_000_000 + 3600 * 1000), sample(1_000_000 + 3601 * 1000)]);
    assert.equal(more.length, 3600);
    assert.equal(more[0].t, 1_000_000 + 2000);
    assert.equal(more.at(-1).t - more[0].t, 3599 * 1000);
    // After a long outage only the new hour is kept.
    const later = data.mergeSamples(hour, [sample(1_000_000 + 10 * 3600 * 1000)]);
    assert.deepEqual(ts(later), [1_000_000 + 10 * 3600 * 1000]);
  });

  test("a window is the samples within its span; the nearest sample is found by time", () => {
    const samples = [1000, 2000, 3000, 4000, 5000].map((t) => sample(t));
    assert.deepEqual(ts(data.windowSamples(samples, 5000, 2000)), [3000, 4000, 5000]);
    assert.deepEqual(ts(data.windowSamples(samples, 4500, 2000)), [3000, 4000]);
    assert.deepEqual(ts(data.windowSamples(samples, 100_000, 1000)), []);
    assert.equal(data.nearestIndex(samples, 2400), 1);
    assert.equal(data.nearestIndex(samples, 2600), 2);
    assert.equal(data.nearestIndex(samples, -5), 0);
    assert.equal(data.nearestIndex(samples, 99_999), 4);
    assert.equal(data.nearestIndex([], 1), -1);
  });

  test("a series breaks into runs at missing values and at gaps in time", () => {
    const samples = [
      sample(1000, { actor_p99_ms: 1 }),
      sample(2000, { actor_p99_ms: 2 }),
      sample(3000, { actor_p99_ms: null }),
      sample(4000, { actor_p99_ms: 4 }),
      sample(5000, { actor_p99_ms: 5 }),
      sample(60_000, { actor_p99_ms: 6 }),
    ];
    const runs = data.seriesRuns(samples, (s) => s.actor_p99_ms);
    assert.deepEqual(runs, [
      [
        [1000, 1],
        [2000, 2],
      ],
      [
        [4000, 4],
        [5000, 5],
      ],
      [[60_000, 6]],
    ]);
  });

  test("thinning a long run keeps its extremes, in time order", () => {
    const run = [];
    for (let i = 0; i < 3600; i++) run.push([i * 1000, i === 1234 ? 999 : i === 2345 ? -5 : i % 7]);
    const thin = data.decimate(run, 100);
    assert.ok(thin.length <= 200, `${thin.length} points`);
    assert.ok(thin.some(([, v]) => v === 999), "the spike survives");
    assert.ok(thin.some(([, v]) => v === -5), "the dip survives");
    for (let i = 1; i < thin.length; i++) assert.ok(thin[i][0] > thin[i - 1][0], "in time order");
    assert.deepEqual(data.decimate(run.slice(0, 10), 100), run.slice(0, 10), "short runs stay as they are");
  });

  test("axis ticks are round and cover the data; a second axis shares the grid", () => {
    assert.deepEqual(data.niceTicks(0), [0, 0.25, 0.5, 0.75, 1]);
    assert.deepEqual(data.niceTicks(0, 4, 1), [0, 1]);
    assert.deepEqual(data.niceTicks(207, 4, 1), [0, 100, 200, 300]);
    assert.deepEqual(data.niceTicks(3.2), [0, 1, 2, 3, 4]);
    assert.deepEqual(data.alignedTicks(168, 4, 1), [0, 50, 100, 150, 200]);
    assert.deepEqual(data.alignedTicks(100, 4), [0, 25, 50, 75, 100]);
    assert.deepEqual(data.alignedTicks(0.3, 3, 1), [0, 1, 2, 3]);
    const times = data.timeTicks(0, 300_000, 5);
    assert.ok(times.length >= 2 && times.length <= 6, `${times.length} time ticks`);
    for (const t of times) assert.ok(t >= 0 && t <= 300_000);
  });

  test("numbers are formatted for people", () => {
    assert.equal(data.formatNumber(null), "–");
    assert.equal(data.formatNumber(1234), "1,234");
    assert.equal(data.formatNumber(0.125), "0.13");
    assert.equal(data.formatMs(0.14), "0.14 ms");
    assert.equal(data.formatMs(230.4), "230 ms");
    assert.equal(data.formatBytes(512, "/s"), "512 B/s");
    assert.equal(data.formatBytes(12_345, "/s"), "12.3 kB/s");
    assert.equal(data.formatBytes(4_100_000), "4.1 MB");
    assert.equal(data.formatCompact(25_000), "25k");
    assert.equal(data.formatCompact(1500), "1,500");
    assert.equal(data.formatDuration(45_000), "45 s");
    assert.equal(data.formatDuration(3_720_000), "1 h 2 min");
  });

  test("answers are parsed defensively", () => {
    const parsed = data.parseData({
      now: 5000,
      samples: [
        {
          t: 4000,
          moves_per_s: 10,
          actor_p99_ms: null,
          load_run: { players: 5, knee: 3, phase: "ramp" },
          kinds: [{ name: "sheep", emoji: "🐑", actors: 20, moves_per_s: 4, ok_per_s: 3 }, "junk"],
        },
        { moves_per_s: 3 },
        { t: 3000, moves_per_s: "lots" },
      ],
      zones: { cols: 2, rows: 1, zone_size: 50, moves_per_s: [1, null], mailbox: [0, 4] },
      world: { width: 100, height: 50 },
    });
    assert.equal(parsed.now, 5000);
    assert.deepEqual(ts(parsed.samples), [4000, 3000], "a sample without t is dropped");
    assert.equal(parsed.samples[0].moves_per_s, 10);
    assert.equal(parsed.samples[0].actor_p99_ms, null);
    assert.equal(parsed.samples[0].busy_per_s, null, "missing fields are null");
    assert.equal(parsed.samples[1].moves_per_s, null);
    // Each kind of actor, what is missing null; no kinds at all is an empty list.
    assert.deepEqual(parsed.samples[0].kinds, [
      { name: "sheep", emoji: "🐑", actors: 20, moves_per_s: 4, ok_per_s: 3, stayed_per_s: null },
      { name: "?", emoji: "", actors: null, moves_per_s: null, ok_per_s: null, stayed_per_s: null },
    ]);
    assert.deepEqual(parsed.samples[1].kinds, []);
    assert.deepEqual(parsed.samples[0].load_run, {
      players: 5,
      moves_per_s: null,
      p50_ms: null,
      p99_ms: null,
      errors: null,
      knee: 3,
      phase: "ramp",
    });
    assert.deepEqual(parsed.zones, { cols: 2, rows: 1, zone_size: 50, moves_per_s: [1, 0], mailbox: [0, 4] });
    assert.deepEqual(data.parseData(null).samples, []);
    assert.equal(data.lastLoadRun(parsed.samples).t, 4000);
  });

  test("the cluster is parsed defensively; a single node is a cluster of one", () => {
    const parsed = data.parseData({
      cluster: {
        node: "grove1@a",
        zone_count: 16,
        members: [
          { node: "grove1@a", self: true, member: true, reachable: true, zones: 9, players: 3, actors: 40, sessions: 3 },
          { node: "grove2@b", self: false, member: true, reachable: false, zones: 7, players: null, actors: null, sessions: null },
          { zones: 1 },
        ],
      },
    });
    assert.equal(parsed.cluster.node, "grove1@a");
    assert.equal(parsed.cluster.zone_count, 16);
    assert.deepEqual(
      parsed.cluster.members.map((m) => [m.node, m.self, m.reachable, m.zones, m.players]),
      [
        ["grove1@a", true, true, 9, 3],
        ["grove2@b", false, false, 7, null],
      ],
      "a member without a node's name is dropped",
    );
    assert.deepEqual(data.parseData({}).cluster, { node: "", zone_count: 0, members: [] });
  });

  test("data requests carry the last t and no token; retries back off to 5 s", () => {
    assert.equal(poller.dataUrl(0), "/dashboard/data?since=0");
    assert.equal(poller.dataUrl(1795382472526), "/dashboard/data?since=1795382472526");
    assert.deepEqual([1, 2, 3, 4, 5, 9].map(poller.retryDelay), [1000, 2000, 4000, 5000, 5000, 5000]);
  });
});

// The page against a real server.

const TOKEN = "dashboard-test-token-0123456789";
const mockServer = /mock-server/.test(TEST_SERVER) ? "the node mock server has no /dashboard" : false;
const COLS = 4;
const ROWS = 3;
const CHART_IDS = ["throughput", "latency", "population", "network", "pressure", "memory", "schedulers", "zones"];
const SAMPLE_FIELDS = [
  "t",
  "moves_per_s",
  "moves_ok_per_s",
  "busy_per_s",
  "handoffs_per_s",
  "entities",
  "players",
  "actors",
  "zone_mailbox_max",
  "actor_p50_ms",
  "actor_p99_ms",
  "tick_p99_ms",
  "player_p99_ms",
  "sessions",
  "writes_out_per_s",
  "bytes_out_json_per_s",
  "bytes_out_binary_per_s",
  "bytes_in_per_s",
  "views_held_per_s",
  "slow_consumers",
  "protocol_errors_per_s",
  "memory_mb",
  "processes",
  "run_queue",
  "scheduler_utilization",
  "load_run",
];

/** What the charts show: per chart, its points, plotted series and legend values. */
// What each chart shows, read in the page. With `whole`, it waits for a
// moment at which every legend shows a value and reads that moment (one
// read, so no new sample comes between the check and the read): a second
// in which the walking player's moves happened to miss the sample rightly
// shows "–" for the players' p99.
function chartState(page, { whole = false } = {}) {
  const read = (whole) => {
    const charts = [...document.querySelectorAll(".chart")].map((chart) => ({
      id: chart.dataset.chart,
      points: Number(chart.dataset.points),
      plotted: Number(chart.dataset.series),
      lastT: Number(chart.dataset.lastT),
      paths: [...chart.querySelectorAll("path.series")].map((path) => ({
        series: path.dataset.series,
        segments: (path.getAttribute("d").match(/[ML]/g) ?? []).length,
      })),
      values: Object.fromEntries(
        [...chart.querySelectorAll(".legend li")].map((item) => [item.dataset.series, item.querySelector(".value").textContent]),
      ),
    }));
    return !whole || charts.every((chart) => !Object.values(chart.values).includes("–")) ? charts : null;
  };
  if (!whole) return page.evaluate(read, false);
  // If no such moment comes, what the page shows then, so that the test's
  // assertions name the chart without a value.
  return page
    .waitForFunction(read, true, { timeout: 20_000 })
    .then((handle) => handle.jsonValue())
    .catch(() => page.evaluate(read, false));
}

describe("the dashboard page", { skip: skipReason || mockServer, timeout: 300_000 }, () => {
  let server;
  let browser;
  let game;
  let walking;
  const url = (path) => new URL(path, server.url).href;
  const dashboardUrl = () => url(`dashboard?token=${TOKEN}`);

  before(async () => {
    const previous = process.env.GROVE_ADMIN_TOKEN;
    process.env.GROVE_ADMIN_TOKEN = TOKEN;
    try {
      // 200 x 150 cells in zones of 50: 4 x 3 zones.
      server = await startServer({ actors: 300, width: 200, height: 150 });
    } finally {
      if (previous === undefined) delete process.env.GROVE_ADMIN_TOKEN;
      else process.env.GROVE_ADMIN_TOKEN = previous;
    }
    browser = await launchBrowser();
    // A player in the game, walking about, so that there are sessions, bytes
    // and players' moves to show.
    game = await openGame(browser, server.url);
    await waitJoined(game.page);
    const keys = ["ArrowUp", "ArrowRight", "ArrowDown", "ArrowLeft"];
    let step = 0;
    walking = setInterval(() => void game.page.keyboard.press(keys[step++ % keys.length]).catch(() => {}), 250);
  });

  after(async () => {
    clearInterval(walking);
    await browser?.close();
    await server?.stop();
  });

  test("without the token the dashboard is refused; with it, every chart plots data that keeps coming", async () => {
    for (const path of ["dashboard", "dashboard/data?since=0"]) {
      const refused = await fetch(url(path));
      assert.equal(refused.status, 401, `GET /${path} without the token (is GROVE_ADMIN_TOKEN honoured by ${TEST_SERVER}?)`);
      await refused.body?.cancel();
    }
    // The token in an address is traded for a session cookie, and leaves it.
    const traded = await fetch(dashboardUrl(), { redirect: "manual" });
    assert.equal(traded.status, 303);
    assert.equal(traded.headers.get("location"), "/dashboard");
    const session = traded.headers.get("set-cookie").split(";")[0];
    await traded.body?.cancel();
    const html = await fetch(url("dashboard"), { headers: { Cookie: session } });
    assert.equal(html.status, 200);
    assert.match(await html.text(), /\/assets\/dashboard\.js/);
    const bearer = await fetch(url("dashboard/data?since=0"), { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(bearer.status, 200);
    const body = await bearer.json();
    assert.deepEqual([body.zones.cols, body.zones.rows], [COLS, ROWS]);
    assert.deepEqual(body.world, { width: 200, height: 150 });

    const { page, problems } = await openGame(browser, dashboardUrl());
    const requests = [];
    page.on("request", (request) => {
      if (request.url().includes("/dashboard/data")) requests.push(request.url());
    });
    await page.waitForFunction(() => window.groveDashboard?.state().connection === "live", null, { timeout: 15_000 });
    // A few seconds in, with the player's session counted.
    await page.waitForFunction(
      () => window.groveDashboard.state().updates >= 3 && (window.groveDashboard.samples().at(-1)?.sessions ?? 0) >= 1,
      null,
      { timeout: 20_000 },
    );

    // The server's samples have every field the page plots.
    const latest = await (await fetch(url(`dashboard/data?since=0&token=${TOKEN}`))).json();
    for (const field of SAMPLE_FIELDS) assert.ok(field in latest.samples.at(-1), `samples have ${field}`);

    const charts = await chartState(page, { whole: true });
    assert.deepEqual(charts.map((c) => c.id), CHART_IDS);
    for (const chart of charts) {
      assert.equal(chart.plotted, chart.paths.length, `${chart.id}: every series is plotted`);
      for (const path of chart.paths) assert.ok(path.segments >= 2, `${chart.id}/${path.series}: a line of points`);
      for (const [series, value] of Object.entries(chart.values)) assert.notEqual(value, "–", `${chart.id}/${series} has a value`);
    }
    const throughput = charts.find((c) => c.id === "throughput");
    assert.match(throughput.values.moves, /^[\d,]+\/s$/);
    assert.ok(Number(throughput.values.moves.replace(/\D/g, "")) > 0, "actors are moving");
    const status = await page.evaluate(() => ({
      state: document.getElementById("status").dataset.state,
      text: document.getElementById("status-text").textContent,
      sessions: document.getElementById("now-sessions").textContent,
    }));
    assert.deepEqual([status.state, status.text], ["live", "live"]);
    assert.ok(Number(status.sessions) >= 1, `sessions shown: ${status.sessions}`);

    // The numbers move on: every chart gets the next samples, and the values change.
    const before = charts;
    await page.waitForFunction(
      (lastT) => [...document.querySelectorAll(".chart")].every((chart) => Number(chart.dataset.lastT) > lastT),
      Math.max(...before.map((c) => c.lastT)),
      { timeout: 10_000 },
    );
    const legend = (state) => JSON.stringify(state.map((c) => c.values));
    const first = legend(before);
    let later = await chartState(page);
    for (let i = 0; i < 20 && legend(later) === first; i++) {
      await page.waitForTimeout(500);
      later = await chartState(page);
    }
    assert.notEqual(legend(later), first, "the current values change");
    for (const chart of later) {
      const was = before.find((c) => c.id === chart.id);
      assert.ok(chart.points >= was.points, `${chart.id}: ${chart.points} points, had ${was.points}`);
    }

    // The token left the page's address at once, and no data request carries it.
    assert.equal(new URL(page.url()).search, "");
    assert.ok(requests.length >= 3);
    for (const request of requests) assert.equal(new URL(request).searchParams.get("token"), null);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("logging in on the page's form opens the dashboard, with the token nowhere in an address", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const addresses = [];
    page.on("request", (request) => addresses.push(request.url()));
    await page.goto(url("dashboard"));
    await page.fill("#token", TOKEN);
    await Promise.all([page.waitForURL(url("dashboard")), page.click("button[type=submit]")]);
    await page.waitForFunction(() => window.groveDashboard?.state().connection === "live", null, { timeout: 15_000 });

    for (const address of addresses) assert.ok(!address.includes(TOKEN), `the token in ${address}`);
    const [cookie] = (await context.cookies()).filter((c) => c.name === "grove_admin");
    assert.ok(cookie, "a session cookie");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.ok(!cookie.value.includes(TOKEN), "the cookie holds no token");
    await context.close();
  });

  test("the heat map has a cell per zone, coloured, with its numbers", async () => {
    const { page, problems } = await openGame(browser, dashboardUrl());
    await page.waitForFunction(() => window.groveDashboard?.zones() !== undefined, null, { timeout: 15_000 });
    const zones = await page.evaluate(() => window.groveDashboard.zones());
    assert.deepEqual([zones.cols, zones.rows], [COLS, ROWS]);
    const cells = await page.evaluate(() =>
      [...document.querySelectorAll("#heatmap rect.zone")].map((rect) => ({
        fill: rect.getAttribute("fill"),
        title: rect.querySelector("title")?.textContent ?? "",
        moves: Number(rect.dataset.moves),
        width: Number(rect.getAttribute("width")),
      })),
    );
    assert.equal(cells.length, zones.cols * zones.rows);
    for (const cell of cells) {
      assert.match(cell.fill, /^rgb\(/);
      assert.match(cell.title, /moves\/s/);
      assert.match(cell.title, /mailbox \d/);
      assert.equal(cell.width, 50);
    }
    await page.waitForFunction(
      () => [...document.querySelectorAll("#heatmap rect.zone")].some((rect) => Number(rect.dataset.moves) > 0),
      null,
      { timeout: 10_000 },
    );

    // The second layer: colour by mailbox.
    await page.click('[data-layer="mailbox"]');
    assert.equal(await page.getAttribute('[data-layer="mailbox"]', "aria-pressed"), "true");
    assert.match(await page.getAttribute("#heatmap-legend", "data-high"), /messages/);
    assert.equal(await page.locator("#heatmap rect.zone").count(), zones.cols * zones.rows);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("the cluster panel shows a single node as a cluster of one that runs every zone", async () => {
    const body = await (await fetch(url(`dashboard/data?since=0&token=${TOKEN}`))).json();
    assert.equal(body.cluster.zone_count, COLS * ROWS);
    assert.equal(body.cluster.members.length, 1);
    const node = body.cluster.node;

    const { page, problems } = await openGame(browser, dashboardUrl());
    await page.waitForFunction(() => document.getElementById("cluster")?.dataset.members === "1", null, {
      timeout: 15_000,
    });
    // The walking player, in a zone of this node, with its session; the actors too.
    await page.waitForFunction(
      () => {
        const row = document.querySelector("#cluster-table tbody tr");
        const value = (field) => Number(row?.querySelector(`[data-field="${field}"]`)?.textContent.replace(/\D/g, ""));
        return value("players") >= 1 && value("sessions") >= 1 && value("actors") > 0;
      },
      null,
      { timeout: 20_000 },
    );
    const panel = await page.evaluate(() => ({
      summary: document.getElementById("cluster-summary").textContent,
      rows: [...document.querySelectorAll("#cluster-table tbody tr")].map((row) => ({
        node: row.dataset.node,
        self: row.classList.contains("self"),
        unreachable: row.classList.contains("unreachable"),
        zones: row.querySelector('[data-field="zones"]').textContent,
        name: row.querySelector('[data-field="node"]').textContent,
      })),
      headers: [...document.querySelectorAll("#cluster-table thead th")].map((th) => th.textContent),
      footer: document.querySelectorAll("#cluster-table tfoot tr").length,
      held: window.groveDashboard.cluster(),
    }));
    assert.equal(panel.summary, `A cluster of one · ${COLS * ROWS} zones`);
    assert.deepEqual(panel.headers, ["Node", "Zones", "Players", "Actors", "Sessions"]);
    assert.deepEqual(panel.rows, [
      { node, self: true, unreachable: false, zones: `${COLS * ROWS} · 100 %`, name: `${node} (this one)` },
    ]);
    assert.equal(panel.footer, 0, "no total row for one node");
    assert.equal(panel.held.node, node);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("the cluster panel lists several nodes with a total, and says which one does not answer", async () => {
    const { page, problems } = await openGame(browser, dashboardUrl());
    // The server's answers, with the cluster of three nodes one would have.
    const cluster = {
      node: "grove1@a",
      zone_count: 12,
      members: [
        { node: "grove1@a", self: true, member: true, reachable: true, zones: 5, players: 2, actors: 1200, sessions: 2 },
        { node: "grove2@b", self: false, member: true, reachable: true, zones: 4, players: 1, actors: 900, sessions: 1 },
        { node: "grove3@c", self: false, member: true, reachable: false, zones: 3, players: null, actors: null, sessions: null },
      ],
    };
    // The page polls on its own: an answer on its way when the page closes
    // is dropped (its response disposed), and only then.
    await page.route("**/dashboard/data*", async (route) => {
      try {
        const response = await route.fetch();
        await route.fulfill({ response, json: { ...(await response.json()), cluster } });
      } catch (error) {
        if (!page.isClosed()) throw error;
      }
    });
    await page.waitForFunction(() => document.getElementById("cluster")?.dataset.members === "3", null, {
      timeout: 15_000,
    });
    const panel = await page.evaluate(() => ({
      summary: document.getElementById("cluster-summary").textContent,
      rows: [...document.querySelectorAll("#cluster-table tbody tr")].map((row) => ({
        node: row.dataset.node,
        self: row.classList.contains("self"),
        unreachable: row.classList.contains("unreachable"),
        cells: [...row.querySelectorAll("td")].map((td) => td.textContent),
      })),
      total: [...document.querySelectorAll("#cluster-table tfoot td")].map((td) => td.textContent),
    }));
    assert.equal(panel.summary, "A cluster of 3 nodes · 12 zones · 1 not answering");
    assert.deepEqual(panel.rows, [
      { node: "grove1@a", self: true, unreachable: false, cells: ["grove1@a (this one)", "5 · 42 %", "2", "1,200", "2"] },
      { node: "grove2@b", self: false, unreachable: false, cells: ["grove2@b", "4 · 33 %", "1", "900", "1"] },
      { node: "grove3@c", self: false, unreachable: true, cells: ["grove3@c", "3 · 25 %", "–", "–", "–"] },
    ]);
    // The zones add up; counts a node did not give cannot be totalled.
    assert.deepEqual(panel.total, ["all", "12", "–", "–", "–"]);
    assert.deepEqual(problems, []);
    await page.unrouteAll({ behavior: "wait" });
    await page.close();
  });

  test("a reload shows the whole history again", async () => {
    const { page, problems } = await openGame(browser, dashboardUrl());
    await page.waitForFunction(() => window.groveDashboard?.samples().length >= 5, null, { timeout: 15_000 });
    const beforeReload = await page.evaluate(() => {
      const samples = window.groveDashboard.samples();
      return { count: samples.length, first: samples[0].t, last: samples.at(-1).t };
    });
    assert.ok(beforeReload.count >= 5, `${beforeReload.count} samples`);

    // Only the reloaded page's requests: until the reload commits, the old
    // page still polls (since its last t), and on a loaded machine one of
    // its polls can go out between here and the reload.
    const requests = [];
    let reloaded = false;
    page.on("framenavigated", (frame) => {
      if (frame === page.mainFrame()) reloaded = true;
    });
    page.on("request", (request) => {
      if (reloaded && request.url().includes("/dashboard/data")) requests.push(new URL(request.url()).searchParams);
    });
    await page.reload();
    await page.waitForFunction(() => window.groveDashboard?.state().updates >= 3, null, { timeout: 15_000 });
    const afterReload = await page.evaluate(() => {
      const samples = window.groveDashboard.samples();
      const ordered = samples.every((s, i) => i === 0 || s.t > samples[i - 1].t);
      return { count: samples.length, first: samples[0].t, last: samples.at(-1).t, ordered };
    });
    assert.ok(afterReload.count >= beforeReload.count, `${afterReload.count} samples after the reload, ${beforeReload.count} before`);
    assert.ok(afterReload.first <= beforeReload.first, "the oldest sample is still there");
    assert.ok(afterReload.last >= beforeReload.last);
    assert.ok(afterReload.ordered, "ordered, one per t");
    // The first request asks for everything, the next ones for what is new since the last t held.
    assert.equal(requests[0].get("since"), "0");
    assert.ok(requests.length >= 3);
    for (const query of requests.slice(1)) assert.ok(Number(query.get("since")) >= afterReload.first, `since=${query.get("since")}`);
    for (const query of requests) assert.equal(query.get("token"), null);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("when the data cannot be fetched the page says so, keeps its history and recovers", async () => {
    const { page, problems } = await openGame(browser, dashboardUrl());
    await page.waitForFunction(() => window.groveDashboard?.state().updates >= 2, null, { timeout: 15_000 });
    const held = await page.evaluate(() => window.groveDashboard.samples().length);

    await page.route("**/dashboard/data*", (route) => route.abort("connectionrefused"));
    await page.waitForFunction(() => document.getElementById("status").dataset.state === "reconnecting", null, {
      timeout: 10_000,
    });
    assert.match(await page.textContent("#status-detail"), /retrying in \d+ s/);
    assert.ok((await page.evaluate(() => window.groveDashboard.samples().length)) >= held, "the history is kept");
    const points = await page.evaluate(() => Number(document.querySelector(".chart").dataset.points));
    assert.ok(points > 0, "the charts still show it");

    await page.unroute("**/dashboard/data*");
    await page.waitForFunction(() => document.getElementById("status").dataset.state === "live", null, { timeout: 15_000 });
    const after = await page.evaluate(() => {
      const samples = window.groveDashboard.samples();
      return { count: samples.length, gaps: samples.filter((s, i) => i > 0 && s.t - samples[i - 1].t > 2500).length };
    });
    assert.ok(after.count > held, "the missed samples were fetched");
    assert.equal(after.gaps, 0, "without holes");
    // Only the refused requests may have complained.
    assert.deepEqual(
      problems.filter((problem) => !/Failed to load resource|ERR_CONNECTION_REFUSED/.test(problem)),
      [],
    );
    await page.close();
  });

  test("a load report shows in the load-run panel, with its knee", async () => {
    const { page, problems } = await openGame(browser, dashboardUrl());
    await page.waitForFunction(() => window.groveDashboard?.state().updates >= 1, null, { timeout: 15_000 });
    assert.equal(await page.getAttribute("#loadrun", "data-state"), "idle");
    assert.match(await page.textContent("#loadrun"), /No load run is going/);

    const report = async (body) => {
      const response = await fetch(url(`api/load/report?token=${TOKEN}`), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(response.status, 202);
      await response.body?.cancel();
    };
    const refused = await fetch(url("api/load/report"), { method: "POST", body: "{}" });
    assert.equal(refused.status, 401, "reports need the token too");
    await refused.body?.cancel();

    await report({ players: 1500, moves_per_s: 3000, p50_ms: 1.5, p99_ms: 12.5, errors: 0, knee: null, phase: "ramp" });
    await page.waitForFunction(() => document.getElementById("loadrun").dataset.state === "running", null, { timeout: 10_000 });
    assert.match(await page.textContent("#loadrun-knee"), /No knee yet/);
    assert.equal(await page.textContent("#loadrun-phase"), "ramp");

    await report({ players: 1600, moves_per_s: 3100, p50_ms: 2.25, p99_ms: 48.5, errors: 3, knee: 1234, phase: "steady" });
    await page.waitForFunction(() => document.getElementById("loadrun").dataset.knee === "1234", null, { timeout: 10_000 });
    const panel = await page.evaluate(() => ({
      knee: document.getElementById("loadrun-knee").textContent,
      found: document.getElementById("loadrun-knee").classList.contains("found"),
      phase: document.getElementById("loadrun-phase").textContent,
      players: document.getElementById("loadrun-players").textContent,
      moves: document.getElementById("loadrun-moves").textContent,
      p50: document.getElementById("loadrun-p50").textContent,
      p99: document.getElementById("loadrun-p99").textContent,
      errors: document.getElementById("loadrun-errors").textContent,
    }));
    assert.deepEqual(panel, {
      knee: "Knee at 1,234 players",
      found: true,
      phase: "steady",
      players: "1,600",
      moves: "3,100",
      p50: "2.25 ms",
      p99: "48.5 ms",
      errors: "3",
    });
    const latest = await page.evaluate(() => window.groveDashboard.samples().at(-1).load_run);
    assert.equal(latest.knee, 1234);
    assert.deepEqual(problems, []);
    await page.close();
  });
});
