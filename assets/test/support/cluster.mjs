// A real cluster of Grove nodes on this machine for the browser tests: one
// scripts/test-server OS process per node, each on a free port, named
// uniquely for this run, sharing a cookie kept in a file only this user can
// read (it never appears on a command line or in the environment), with
// no store (a cluster refuses SQLite; without a store every player is a
// guest). The nodes find each other through epmd: the machine's own when
// one runs, else the one the first node starts, which stop() ends again.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { startServer, TEST_SERVER } from "./server.mjs";

const run = promisify(execFile);

/** Why a cluster cannot be started here, or false when it can. */
// Three servers and a browser page on each: a run of many nodes, in
// `make test-deep` (GROVE_TEST_DEEP=1); `make test` tests views across
// nodes without a browser (test/grove/cluster_views_test.exs).
export const clusterSkipReason = process.env.GROVE_TEST_SERVER
  ? `GROVE_TEST_SERVER (${TEST_SERVER}) is not scripts/test-server, which alone starts cluster nodes`
  : !["1", "true"].includes(process.env.GROVE_TEST_DEEP ?? "")
    ? "three servers and their pages: make test-deep (GROVE_TEST_DEEP=1)"
    : false;

/**
 * Starts `size` nodes and resolves once every one of them has started its
 * gateway, with each node's name and URL, the cookie (for the test to
 * check that no output shows it) and stop(). Waiting for the nodes to
 * become members is `waitForCluster`'s job.
 */
export async function startCluster({ size = 3, width, height, actors = 0, env = {} }) {
  const epmdWasUp = await epmdUp();
  const home = await mkdtemp(join(tmpdir(), "grove-cluster-test-"));
  const cookie = randomBytes(24).toString("base64url");
  const cookieFile = join(home, "cookie");
  await writeFile(cookieFile, cookie, { mode: 0o400 });

  const names = await nodeNames(size);
  const servers = [];
  const stop = async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await rm(home, { recursive: true, force: true });
    // An epmd the nodes started for want of one is theirs to take along.
    if (!epmdWasUp && (await epmdUp())) await stopEpmd(100);
  };

  try {
    const started = await Promise.allSettled(
      names.map((name, index) =>
        startServer({
          actors,
          width,
          height,
          env: {
            ...env,
            GROVE_TEST_NO_STORE: "1",
            GROVE_NODE: name,
            GROVE_COOKIE_FILE: cookieFile,
            GROVE_PEERS: names.join(","),
            GROVE_COOKIE: null,
            GROVE_PEERS_DNS: null,
            GROVE_CLUSTER_SIZE: null,
            GROVE_DATABASE_URL: null,
            GROVE_ADMIN_TOKEN: null,
          },
        }).then((server) => {
          servers.push(server);
          return server;
        }),
      ),
    );
    const failed = started.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    const nodes = started.map((result, index) => ({ name: names[index], ...result.value }));
    return { nodes, cookie, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Polls every node until each answers /readyz with 200 and its dashboard
 * data shows the same cluster: all the nodes members and reachable, and
 * every zone placed on one of them, alike on every node. Resolves with
 * that cluster summary (its `placement` names the node of each zone) and
 * the zone grid.
 */
export async function waitForCluster(nodes, { timeoutMs = 120_000, intervalMs = 250 } = {}) {
  const names = nodes.map((node) => node.name).sort();
  const deadline = Date.now() + timeoutMs;
  let last = "nothing asked yet";
  for (;;) {
    try {
      const seen = await Promise.all(nodes.map((node) => clusterSeenBy(node)));
      const problem = seen.map((view, index) => disagreement(view, nodes[index].name, names, seen[0])).find(Boolean);
      if (!problem) return { ...seen[0].cluster, zones: seen[0].zones };
      last = problem;
    } catch (error) {
      last = error.message;
    }
    if (Date.now() > deadline) throw new Error(`the cluster did not come together in ${timeoutMs} ms: ${last}`);
    await new Promise((resolveWait) => setTimeout(resolveWait, intervalMs));
  }
}

/** The node's dashboard data (its cluster and zones) once it is ready; throws while it is not. */
export async function clusterSeenBy(node) {
  const ready = await fetch(new URL("/readyz", node.url));
  if (ready.status !== 200) throw new Error(`${node.name} not ready: ${await ready.text()}`);
  const data = await fetch(new URL("/dashboard/data?since=0", node.url));
  if (data.status !== 200) throw new Error(`${node.name}'s dashboard data answered ${data.status}`);
  return data.json();
}

function disagreement({ cluster }, name, names, first) {
  if (cluster.node !== name) return `${name} calls itself ${cluster.node}`;
  const members = cluster.members.filter((member) => member.member && member.reachable).map((member) => member.node);
  if (members.sort().join(",") !== names.join(",")) return `${name} sees members ${members.join(", ")}`;
  const placement = cluster.placement ?? [];
  if (placement.length !== cluster.zone_count || !placement.every((owner) => names.includes(owner))) {
    return `${name} places zones on ${placement.join(", ")}`;
  }
  if (placement.join(",") !== first.cluster.placement.join(",")) {
    return `${name} places the zones on ${placement.join(", ")}, ${first.cluster.node} on ${first.cluster.placement.join(", ")}`;
  }
  return null;
}

// Names unique to this run. Each names a range of entity ids
// (Grove.Cluster.id_slot/1, a hash of the name); two nodes whose ranges
// meet refuse each other, so names are drawn again until they do not.
async function nodeNames(size) {
  const host = hostname().split(".")[0];
  for (let attempt = 0; attempt < 20; attempt++) {
    const tag = `${process.pid}_${randomBytes(4).toString("hex")}`;
    const names = Array.from({ length: size }, (_, index) => `grove_browser_${tag}_${index + 1}@${host}`);
    const slots = await idSlots(names);
    if (new Set(slots).size === size) return names;
  }
  throw new Error("no names with distinct ranges of entity ids in 20 draws");
}

// The same hash as Grove.Cluster.id_slot/1, from a throwaway VM (no distribution, no cookie).
async function idSlots(names) {
  const { stdout } = await run("erl", [
    "-noshell",
    "-eval",
    'io:format("~w~n", [[1 + erlang:phash2(list_to_binary(N), 1023) || N <- init:get_plain_arguments()]]), halt().',
    "-extra",
    ...names,
  ]);
  return JSON.parse(stdout.trim());
}

// epmd refuses to stop while a node is registered with it ("Killing not
// allowed - living nodes in database."), and a node stopped a moment ago
// may still be: ask again until it stops, for ten seconds at most, so
// that no epmd outlives the tests that started it.
async function stopEpmd(tries) {
  for (let left = tries; left > 0; left--) {
    try {
      await run("epmd", ["-kill"]);
      return;
    } catch {
      await delay(100);
    }
  }
}

async function epmdUp() {
  try {
    await run("epmd", ["-names"]);
    return true;
  } catch {
    return false;
  }
}
