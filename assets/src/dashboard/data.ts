// What the dashboard knows, and the pure functions over it: parsing
// /dashboard/data, merging each second's new samples into the history,
// cutting a time window out of it, splitting a series into drawable runs,
// thinning long runs, axis ticks and number formats. No DOM here, so node
// can test all of it (test/dashboard.test.mjs).

/** The latest load-lab report, while one arrived in the last 15 s. */
export interface LoadRun {
  players: number | null;
  moves_per_s: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  errors: number | null;
  knee: number | null;
  phase: string | null;
}

/** One kind of actor over a sample: how many, and their moves per second. */
export interface KindSample {
  name: string;
  emoji: string;
  actors: number | null;
  moves_per_s: number | null;
  ok_per_s: number | null;
  stayed_per_s: number | null;
}

/** One second of metrics, as recorded by Grove.Metrics.Collector. */
export interface Sample {
  t: number;
  moves_per_s: number | null;
  moves_ok_per_s: number | null;
  busy_per_s: number | null;
  handoffs_per_s: number | null;
  entities: number | null;
  players: number | null;
  actors: number | null;
  zone_mailbox_max: number | null;
  actor_p50_ms: number | null;
  actor_p99_ms: number | null;
  tick_p99_ms: number | null;
  player_p99_ms: number | null;
  sessions: number | null;
  writes_out_per_s: number | null;
  bytes_out_json_per_s: number | null;
  bytes_out_binary_per_s: number | null;
  bytes_in_per_s: number | null;
  views_held_per_s: number | null;
  slow_consumers: number | null;
  protocol_errors_per_s: number | null;
  memory_mb: number | null;
  processes: number | null;
  run_queue: number | null;
  scheduler_utilization: number | null;
  load_run: LoadRun | null;
  kinds: KindSample[];
}

/** The numeric fields of a sample, the ones a chart can plot. */
export type NumericField = Exclude<keyof Sample, "t" | "load_run" | "kinds">;

export const NUMERIC_FIELDS: readonly NumericField[] = [
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
];

/** The zones' load over the last second, row by row. */
export interface Zones {
  cols: number;
  rows: number;
  zone_size: number;
  moves_per_s: number[];
  mailbox: number[];
}

/** One node of the cluster: the zones it runs, the players and actors in them, its sessions. */
export interface ClusterMember {
  node: string;
  /** The node that answered this page. */
  self: boolean;
  /** False for a node that still runs zones after it left. */
  member: boolean;
  /** False when the node did not answer in time: its counts are null. */
  reachable: boolean;
  zones: number;
  players: number | null;
  actors: number | null;
  sessions: number | null;
}

/** The cluster at a glance; a single node is a cluster of one. */
export interface Cluster {
  node: string;
  zone_count: number;
  members: ClusterMember[];
}

/** One answer of GET /dashboard/data. */
export interface DashboardData {
  now: number;
  samples: Sample[];
  zones: Zones;
  world: { width: number; height: number };
  cluster: Cluster;
}

export const SECOND_MS = 1000;
export const HOUR_MS = 3600 * SECOND_MS;

/** Two samples further apart than this are not joined by a line (the server was away). */
export const GAP_MS = 3500;

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function numbers(value: unknown): number[] {
  return Array.isArray(value) ? value.map((n) => num(n) ?? 0) : [];
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function parseLoadRun(value: unknown): LoadRun | null {
  if (typeof value !== "object" || value === null) return null;
  const run = record(value);
  return {
    players: num(run.players),
    moves_per_s: num(run.moves_per_s),
    p50_ms: num(run.p50_ms),
    p99_ms: num(run.p99_ms),
    errors: num(run.errors),
    knee: num(run.knee),
    phase: typeof run.phase === "string" ? run.phase : null,
  };
}

function parseKinds(value: unknown): KindSample[] {
  if (!Array.isArray(value)) return [];
  return value.map((item) => {
    const kind = record(item);
    return {
      name: typeof kind.name === "string" ? kind.name : "?",
      emoji: typeof kind.emoji === "string" ? kind.emoji : "",
      actors: num(kind.actors),
      moves_per_s: num(kind.moves_per_s),
      ok_per_s: num(kind.ok_per_s),
      stayed_per_s: num(kind.stayed_per_s),
    };
  });
}

/** One sample from JSON, or null without a numeric `t`. Missing or non-numeric fields become null. */
export function parseSample(value: unknown): Sample | null {
  const raw = record(value);
  const t = num(raw.t);
  if (t === null) return null;
  const sample = { t, load_run: parseLoadRun(raw.load_run), kinds: parseKinds(raw.kinds) } as Sample;
  for (const field of NUMERIC_FIELDS) sample[field] = num(raw[field]);
  return sample;
}

/** The cluster from JSON, defensively: members without a node's name are dropped. */
export function parseCluster(value: unknown): Cluster {
  const raw = record(value);
  const members: ClusterMember[] = [];
  if (Array.isArray(raw.members)) {
    for (const item of raw.members) {
      const member = record(item);
      if (typeof member.node !== "string") continue;
      members.push({
        node: member.node,
        self: member.self === true,
        member: member.member !== false,
        reachable: member.reachable !== false,
        zones: Math.max(0, Math.floor(num(member.zones) ?? 0)),
        players: num(member.players),
        actors: num(member.actors),
        sessions: num(member.sessions),
      });
    }
  }
  return {
    node: typeof raw.node === "string" ? raw.node : "",
    zone_count: Math.max(0, Math.floor(num(raw.zone_count) ?? 0)),
    members,
  };
}

/** A /dashboard/data answer from JSON, defensively: whatever is missing is empty. */
export function parseData(value: unknown): DashboardData {
  const raw = record(value);
  const zones = record(raw.zones);
  const world = record(raw.world);
  const samples: Sample[] = [];
  if (Array.isArray(raw.samples)) {
    for (const item of raw.samples) {
      const sample = parseSample(item);
      if (sample) samples.push(sample);
    }
  }
  return {
    now: num(raw.now) ?? samples[samples.length - 1]?.t ?? 0,
    samples,
    zones: {
      cols: Math.max(0, Math.floor(num(zones.cols) ?? 0)),
      rows: Math.max(0, Math.floor(num(zones.rows) ?? 0)),
      zone_size: num(zones.zone_size) ?? 0,
      moves_per_s: numbers(zones.moves_per_s),
      mailbox: numbers(zones.mailbox),
    },
    world: { width: num(world.width) ?? 0, height: num(world.height) ?? 0 },
    cluster: parseCluster(raw.cluster),
  };
}

/**
 * The history with `incoming` merged in: ordered by t, one sample per t (a
 * repeated t takes the newer copy), and only the last `keepMs` before the
 * newest sample kept. `history` is not changed; when the incoming samples
 * are all newer (the usual case, once a second) this is an append.
 */
export function mergeSamples(history: readonly Sample[], incoming: readonly Sample[], keepMs: number = HOUR_MS): Sample[] {
  let merged: Sample[];
  const last = history[history.length - 1];
  const sortedIncoming = isSorted(incoming) ? incoming : [...incoming].sort((a, b) => a.t - b.t);
  if (!last || (sortedIncoming[0] && sortedIncoming[0].t > last.t)) {
    merged = history.concat(dedupeSorted(sortedIncoming));
  } else if (sortedIncoming.length === 0) {
    merged = history.slice();
  } else {
    const byT = new Map<number, Sample>();
    for (const sample of history) byT.set(sample.t, sample);
    for (const sample of sortedIncoming) byT.set(sample.t, sample);
    merged = [...byT.values()].sort((a, b) => a.t - b.t);
  }
  const newest = merged[merged.length - 1];
  if (!newest) return merged;
  const from = lowerBound(merged, newest.t - keepMs + 1);
  return from > 0 ? merged.slice(from) : merged;
}

function isSorted(samples: readonly Sample[]): boolean {
  for (let i = 1; i < samples.length; i++) if (samples[i]!.t < samples[i - 1]!.t) return false;
  return true;
}

function dedupeSorted(samples: readonly Sample[]): Sample[] {
  const out: Sample[] = [];
  for (const sample of samples) {
    if (out.length > 0 && out[out.length - 1]!.t === sample.t) out[out.length - 1] = sample;
    else out.push(sample);
  }
  return out;
}

/** The index of the first sample with t >= `t` (samples ordered by t). */
export function lowerBound(samples: readonly { t: number }[], t: number): number {
  let low = 0;
  let high = samples.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (samples[mid]!.t < t) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** The samples with end - windowMs <= t <= end. */
export function windowSamples<T extends { t: number }>(samples: readonly T[], end: number, windowMs: number): T[] {
  const from = lowerBound(samples, end - windowMs);
  const to = lowerBound(samples, end + 1);
  return samples.slice(from, to);
}

/** The index of the sample nearest to `t`, or -1 when there are none. */
export function nearestIndex(samples: readonly { t: number }[], t: number): number {
  if (samples.length === 0) return -1;
  const at = lowerBound(samples, t);
  if (at === 0) return 0;
  if (at >= samples.length) return samples.length - 1;
  return t - samples[at - 1]!.t <= samples[at]!.t - t ? at - 1 : at;
}

/** A plotted point: time (unix ms) and value. */
export type Point = [t: number, value: number];

/**
 * A series as the runs of points a line can join: a run ends at a missing
 * value (null) and where consecutive samples are more than `gapMs` apart.
 */
export function seriesRuns<T extends { t: number }>(samples: readonly T[], value: (sample: T) => number | null, gapMs: number = GAP_MS): Point[][] {
  const runs: Point[][] = [];
  let run: Point[] = [];
  let previousT = Number.NEGATIVE_INFINITY;
  for (const sample of samples) {
    const v = value(sample);
    if (v === null || !Number.isFinite(v) || sample.t - previousT > gapMs) {
      if (run.length > 0) runs.push(run);
      run = [];
    }
    if (v !== null && Number.isFinite(v)) run.push([sample.t, v]);
    previousT = sample.t;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/**
 * A run thinned to about `buckets` * 2 points, keeping each bucket's lowest
 * and highest value in time order, so that spikes survive on an hour-long
 * chart a few hundred pixels wide. Short runs come back as they are.
 */
export function decimate(run: readonly Point[], buckets: number): Point[] {
  if (buckets < 1 || run.length <= buckets * 2) return run.slice();
  const first = run[0]![0];
  const span = run[run.length - 1]![0] - first || 1;
  const out: Point[] = [];
  let bucket = -1;
  let low: Point | undefined;
  let high: Point | undefined;
  const flush = () => {
    if (!low || !high) return;
    if (low === high) out.push(low);
    else if (low[0] < high[0]) out.push(low, high);
    else out.push(high, low);
  };
  for (const point of run) {
    const b = Math.min(buckets - 1, Math.floor(((point[0] - first) / span) * buckets));
    if (b !== bucket) {
      flush();
      bucket = b;
      low = high = point;
    } else {
      if (point[1] < low![1]) low = point;
      if (point[1] > high![1]) high = point;
    }
  }
  flush();
  return out;
}

/** The largest value of the given series over the samples, or 0. */
export function maxOf<T>(samples: readonly T[], values: readonly ((sample: T) => number | null)[]): number {
  let max = 0;
  for (const sample of samples) {
    for (const value of values) {
      const v = value(sample);
      if (v !== null && Number.isFinite(v) && v > max) max = v;
    }
  }
  return max;
}

/**
 * Round axis ticks from 0 up to at least `max`, about `count` of them, in
 * steps of 1, 2 or 5 times a power of ten (at least `minStep`, 1 for counts).
 */
export function niceTicks(max: number, count = 4, minStep = 0): number[] {
  const top = max > 0 && Number.isFinite(max) ? max : 1;
  const rough = top / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(minStep, ([1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power));
  const ticks: number[] = [];
  const n = Math.ceil(top / step - 1e-9);
  for (let i = 0; i <= n; i++) ticks.push(roundTo(i * step, step));
  return ticks;
}

/**
 * Axis ticks from 0 in exactly `divisions` equal steps (1, 2, 2.5 or 5 times
 * a power of ten, at least `minStep`) reaching at least `max`: a second axis
 * whose ticks sit on the first axis's grid lines.
 */
export function alignedTicks(max: number, divisions: number, minStep = 0): number[] {
  const top = max > 0 && Number.isFinite(max) ? max : 1;
  const n = Math.max(1, divisions);
  const rough = top / n;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(minStep, [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough - 1e-12) ?? 10 * power);
  const ticks: number[] = [];
  for (let i = 0; i <= n; i++) ticks.push(roundTo(i * step, step));
  return ticks;
}

function roundTo(value: number, step: number): number {
  const decimals = Math.max(0, -Math.floor(Math.log10(step)) + 1);
  return Number(value.toFixed(Math.min(decimals, 10)));
}

/** Time ticks (unix ms) within [start, end], on whole steps of local time. */
export function timeTicks(start: number, end: number, count = 5): number[] {
  const span = Math.max(1, end - start);
  const steps = [10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].map((s) => s * SECOND_MS);
  const step = steps.find((s) => span / s <= count) ?? steps[steps.length - 1]!;
  const offset = new Date(start).getTimezoneOffset() * 60 * SECOND_MS;
  const ticks: number[] = [];
  for (let t = Math.ceil((start - offset) / step) * step + offset; t <= end; t += step) ticks.push(t);
  return ticks;
}

// Number formats: compact for axes, a little more precise for current values.

const grouped = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });

/** 1234 -> "1.2k", 0.5 -> "0.5", 12 -> "12". */
export function formatCompact(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${trim(value / 1e9)}G`;
  if (abs >= 1e6) return `${trim(value / 1e6)}M`;
  if (abs >= 1e4) return `${trim(value / 1e3)}k`;
  if (abs >= 1000) return grouped.format(value);
  return trim(value);
}

function trim(value: number): string {
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  return String(Number(value.toFixed(digits)));
}

/** A count or rate: grouped integers, small fractions kept. */
export function formatNumber(value: number | null): string {
  if (value === null) return "–";
  if (Number.isInteger(value) || Math.abs(value) >= 100) return grouped.format(value);
  return trim(value);
}

/** Milliseconds, e.g. "0.14 ms", "12.5 ms", "230 ms". */
export function formatMs(value: number | null): string {
  if (value === null) return "–";
  return `${trim(value)} ms`;
}

/** Bytes (per second, with the suffix given): "512 B", "12.3 kB", "4.1 MB". */
export function formatBytes(value: number | null, suffix = ""): string {
  if (value === null) return "–";
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${trim(value / 1e9)} GB${suffix}`;
  if (abs >= 1e6) return `${trim(value / 1e6)} MB${suffix}`;
  if (abs >= 1e3) return `${trim(value / 1e3)} kB${suffix}`;
  return `${Math.round(value)} B${suffix}`;
}

/** Compact bytes for an axis: "0", "500", "20k", "1.5M". */
export function formatBytesCompact(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${trim(value / 1e9)}G`;
  if (abs >= 1e6) return `${trim(value / 1e6)}M`;
  if (abs >= 1e3) return `${trim(value / 1e3)}k`;
  return trim(value);
}

/** Local wall-clock time, "14:03:07" (or "14:03" with seconds: false). */
export function formatClock(t: number, seconds = true): string {
  const date = new Date(t);
  const pad = (n: number) => String(n).padStart(2, "0");
  const hm = `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return seconds ? `${hm}:${pad(date.getSeconds())}` : hm;
}

/** A duration, "45 s", "5 min", "1 h 2 min". */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / SECOND_MS));
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  return m % 60 === 0 ? `${h} h` : `${h} h ${m % 60} min`;
}

/** The most recent sample that carried a load-run report, if any. */
export function lastLoadRun(samples: readonly Sample[]): Sample | undefined {
  for (let i = samples.length - 1; i >= 0; i--) if (samples[i]!.load_run) return samples[i];
  return undefined;
}
