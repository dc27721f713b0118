// The operators' dashboard at /dashboard: an hour of the server's metrics,
// fetched once on load and then second by second, drawn as charts over a
// chosen window, with a heat map of the zones, the nodes of the cluster and
// the load lab's progress.
// Behind an admin token, the page's requests carry the session cookie the
// server set when the operator logged in: the token is never in the URL.
import "./style.css";
import { Chart } from "./chart";
import { ClusterPanel } from "./cluster";
import {
  formatClock,
  formatDuration,
  formatMs,
  formatNumber,
  HOUR_MS,
  lastLoadRun,
  mergeSamples,
  windowSamples,
  type Cluster,
  type DashboardData,
  type Sample,
  type Zones,
} from "./data";
import { HeatMap, type HeatLayer } from "./heatmap";
import { LoadRunPanel } from "./loadrun";
import { Poller, type PollStatus } from "./poller";
import { CHARTS } from "./specs";

function element<T extends Element = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`dashboard.html lacks #${id}`);
  return found as unknown as T;
}

const WINDOWS = [5 * 60_000, 15 * 60_000, HOUR_MS];
const WINDOW_KEY = "grove.dashboard.window";

const params = new URLSearchParams(location.search);

let samples: Sample[] = [];
let zones: Zones | undefined;
let world = { width: 0, height: 0 };
let cluster: Cluster | undefined;
let serverNow = 0;
let windowMs = initialWindow();
let hoverT: number | null = null;
let updates = 0;

function initialWindow(): number {
  const asked = Number(params.get("window"));
  if (WINDOWS.includes(asked * 60_000)) return asked * 60_000;
  try {
    const stored = Number(localStorage.getItem(WINDOW_KEY));
    if (WINDOWS.includes(stored)) return stored;
  } catch {
    // Storage may be off; the default will do.
  }
  return 5 * 60_000;
}

// Charts.
const chartsBox = element("charts");
const charts = CHARTS.map((spec) => new Chart(spec, setHover));
chartsBox.append(...charts.map((chart) => chart.element));

function setHover(t: number | null): void {
  if (t === hoverT) return;
  hoverT = t;
  for (const chart of charts) chart.setHover(t);
}

// The heat map and the load-run panel.
const heatMap = new HeatMap(element<SVGSVGElement>("heatmap"), element("heatmap-legend"), element("heatmap-summary"));
for (const button of document.querySelectorAll<HTMLButtonElement>("[data-layer]")) {
  button.addEventListener("click", () => {
    heatMap.setLayer(button.dataset.layer as HeatLayer);
    for (const other of document.querySelectorAll<HTMLButtonElement>("[data-layer]")) {
      other.setAttribute("aria-pressed", String(other === button));
    }
  });
}
const loadRun = new LoadRunPanel(element("loadrun"));
const clusterPanel = new ClusterPanel(element("cluster"));

// The window selector.
const windowButtons = [...document.querySelectorAll<HTMLButtonElement>("[data-window]")];
for (const button of windowButtons) {
  button.addEventListener("click", () => {
    windowMs = Number(button.dataset.window);
    try {
      localStorage.setItem(WINDOW_KEY, String(windowMs));
    } catch {
      // Not remembered, then.
    }
    showWindow();
    drawCharts();
  });
}

function showWindow(): void {
  for (const button of windowButtons) button.setAttribute("aria-pressed", String(Number(button.dataset.window) === windowMs));
}

// Redraw at the new width when the page is resized, once per frame at most.
let resizeQueued = false;
new ResizeObserver(() => {
  if (resizeQueued) return;
  resizeQueued = true;
  requestAnimationFrame(() => {
    resizeQueued = false;
    for (const chart of charts) chart.render();
  });
}).observe(chartsBox);

function drawCharts(): void {
  const latest = samples[samples.length - 1];
  const end = Math.max(serverNow, latest?.t ?? 0);
  const start = end - windowMs;
  const shown = windowSamples(samples, end, windowMs);
  for (const chart of charts) chart.update(shown, start, end, latest);
}

// The numbers in the header.
const tiles: [string, (s: Sample) => string][] = [
  ["now-moves", (s) => formatNumber(s.moves_per_s)],
  ["now-players", (s) => formatNumber(s.players)],
  ["now-sessions", (s) => formatNumber(s.sessions)],
  ["now-entities", (s) => formatNumber(s.entities)],
  ["now-p99", (s) => formatMs(s.actor_p99_ms)],
  ["now-memory", (s) => (s.memory_mb === null ? "–" : `${formatNumber(s.memory_mb)} MB`)],
  ["now-schedulers", (s) => (s.scheduler_utilization === null ? "–" : `${Math.round(s.scheduler_utilization * 100)} %`)],
];

// Each kind of actor: its emoji and name, how many, and its moves per second.
function kindsText(s: Sample): string {
  if (s.kinds.length === 0) return "–";
  return s.kinds
    .map((kind) => {
      const stays = kind.stayed_per_s ? `, ${formatNumber(kind.stayed_per_s)} stay/s` : "";
      return `${kind.emoji || "🐞"} ${kind.name} ${formatNumber(kind.actors)} · ${formatNumber(kind.moves_per_s)} moves/s${stays}`;
    })
    .join("  ");
}

function drawTiles(latest: Sample | undefined): void {
  for (const [id, text] of [...tiles, ["now-kinds", kindsText] as [string, (s: Sample) => string]]) {
    const value = latest ? text(latest) : "–";
    const node = document.getElementById(id);
    if (node && node.textContent !== value) node.textContent = value;
  }
  const first = samples[0];
  const history = element("history");
  history.textContent =
    first && latest
      ? `${formatNumber(samples.length)} samples held, ${formatDuration(latest.t - first.t + 1000)} of history`
      : "no samples yet";
}

function receive(data: DashboardData): void {
  samples = mergeSamples(samples, data.samples, HOUR_MS);
  zones = data.zones;
  world = data.world;
  cluster = data.cluster;
  serverNow = data.now;
  updates++;
  const latest = samples[samples.length - 1];
  drawCharts();
  heatMap.update(data.zones, data.world);
  loadRun.update(latest, lastLoadRun(samples));
  clusterPanel.update(data.cluster);
  drawTiles(latest);
  showStatus(poller.current());
  document.body.dataset.updates = String(updates);
}

// The connection pill.
const status = element("status");
const statusText = element("status-text");
const statusDetail = element("status-detail");
const retryButton = element<HTMLButtonElement>("retry");
retryButton.addEventListener("click", () => poller.retryNow());

const stateLabels: Record<PollStatus["state"], string> = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  unauthorized: "not authorized",
};

function showStatus(current: PollStatus): void {
  status.dataset.state = current.state;
  document.body.dataset.connection = current.state;
  statusText.textContent = stateLabels[current.state];
  const latest = samples[samples.length - 1];
  let detail = latest ? `last sample ${formatClock(latest.t)}` : "";
  if (current.state === "live" && latest && serverNow - latest.t > 5000) {
    detail += ` · no new samples for ${formatDuration(serverNow - latest.t)}`;
  } else if (current.state === "live" && !latest) {
    detail = "the server has no samples yet";
  }
  if (current.state === "reconnecting") {
    const wait = current.retryAt === undefined ? 0 : Math.max(0, Math.ceil((current.retryAt - Date.now()) / 1000));
    detail = `${current.error ?? "no answer"}; retrying in ${wait} s (attempt ${current.failures + 1})${latest ? `; history kept, ${detail}` : ""}`;
  } else if (current.state === "unauthorized") {
    detail = current.error ?? "";
  }
  if (statusDetail.textContent !== detail) statusDetail.textContent = detail;
  retryButton.hidden = current.state === "live" || current.state === "connecting";
}

const poller = new Poller({
  since: () => samples[samples.length - 1]?.t ?? 0,
  onData: receive,
  onStatus: showStatus,
});

// The countdown to the next attempt while the server is away.
setInterval(() => {
  const current = poller.current();
  if (current.state === "reconnecting") showStatus(current);
}, 500);

// For tests and curious operators: what the page holds.
declare global {
  interface Window {
    groveDashboard: {
      samples(): Sample[];
      zones(): Zones | undefined;
      world(): { width: number; height: number };
      cluster(): Cluster | undefined;
      state(): {
        connection: PollStatus["state"];
        failures: number;
        requests: number;
        updates: number;
        windowMs: number;
        lastT: number;
      };
    };
  }
}

window.groveDashboard = {
  samples: () => samples,
  zones: () => zones,
  world: () => world,
  cluster: () => cluster,
  state: () => ({
    connection: poller.current().state,
    failures: poller.failuresTotal,
    requests: poller.requests,
    updates,
    windowMs,
    lastT: samples[samples.length - 1]?.t ?? 0,
  }),
};

showWindow();
drawCharts();
poller.start();
