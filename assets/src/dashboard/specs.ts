// Which charts the dashboard draws, and what each plots.
import type { ChartSpec } from "./chart";
import { formatBytes, formatBytesCompact, formatCompact, formatMs, formatNumber } from "./data";

const colours = {
  green: "#57d36b",
  blue: "#5aa9f0",
  amber: "#f0b44c",
  pink: "#e36fa8",
  violet: "#a98bf0",
  teal: "#4fd1c5",
  red: "#f06a5a",
  grey: "#a8b5a4",
};

const perSecond = (value: number | null) => (value === null ? "–" : `${formatNumber(value)}/s`);
const count = (value: number | null) => formatNumber(value);
const ms = (value: number | null) => formatMs(value);
const bytesPerSecond = (value: number | null) => formatBytes(value, "/s");
const percent = (value: number | null) => (value === null ? "–" : `${formatNumber(Math.round(value * 10) / 10)} %`);
const msTick = (value: number) => formatCompact(value);

export const CHARTS: ChartSpec[] = [
  {
    id: "throughput",
    title: "Throughput",
    note: "Moves the zones decided each second; busy means a zone turned a move away for being overloaded.",
    left: { label: "moves/s", tick: formatCompact, minStep: 1 },
    series: [
      { key: "moves", label: "moves", colour: colours.green, value: (s) => s.moves_per_s, format: perSecond },
      { key: "ok", label: "ok", colour: colours.blue, value: (s) => s.moves_ok_per_s, format: perSecond, dashed: true },
      { key: "busy", label: "busy", colour: colours.red, value: (s) => s.busy_per_s, format: perSecond },
      { key: "handoffs", label: "handoffs", colour: colours.amber, value: (s) => s.handoffs_per_s, format: perSecond },
    ],
  },
  {
    id: "latency",
    title: "Move round trip",
    note: "From an actor sending a move to its outcome, and players' p99 on the server (the move read off the socket to its outcome written), over the last second.",
    left: { label: "ms", tick: msTick },
    series: [
      { key: "p50", label: "actors p50", colour: colours.teal, value: (s) => s.actor_p50_ms, format: ms },
      { key: "p99", label: "actors p99", colour: colours.pink, value: (s) => s.actor_p99_ms, format: ms },
      { key: "players", label: "players p99", colour: colours.violet, value: (s) => s.player_p99_ms, format: ms, dashed: true },
    ],
  },
  {
    id: "population",
    title: "Population and sessions",
    note: "Entities in the world (actors and players) on the left; WebSocket sessions and players on the right.",
    left: { label: "entities", tick: formatCompact, minStep: 1 },
    right: { label: "sessions, players", tick: formatCompact, minStep: 1 },
    series: [
      { key: "entities", label: "entities", colour: colours.green, value: (s) => s.entities, format: count },
      { key: "actors", label: "actors", colour: colours.grey, value: (s) => s.actors, format: count, dashed: true },
      { key: "sessions", label: "sessions", colour: colours.blue, value: (s) => s.sessions, format: count, axis: "right" },
      { key: "players", label: "players", colour: colours.amber, value: (s) => s.players, format: count, axis: "right" },
    ],
  },
  {
    id: "network",
    title: "Network",
    note: "Bytes sent to clients by encoding, and received from them; socket writes on the right (each carries every frame then due).",
    left: { label: "bytes/s", tick: formatBytesCompact, minStep: 1 },
    right: { label: "writes/s", tick: formatCompact, minStep: 1 },
    series: [
      { key: "json", label: "out, JSON", colour: colours.amber, value: (s) => s.bytes_out_json_per_s, format: bytesPerSecond },
      { key: "binary", label: "out, binary", colour: colours.violet, value: (s) => s.bytes_out_binary_per_s, format: bytesPerSecond },
      { key: "in", label: "in", colour: colours.teal, value: (s) => s.bytes_in_per_s, format: bytesPerSecond },
      { key: "writes", label: "socket writes", colour: colours.grey, value: (s) => s.writes_out_per_s, format: perSecond, axis: "right", dashed: true },
    ],
  },
  {
    id: "pressure",
    title: "Back-pressure and errors",
    note: "Writes that held views and broadcasts back for sockets that are behind; bad client messages. Slow consumers closed so far on the right.",
    left: { label: "per second", tick: formatCompact, minStep: 1 },
    right: { label: "closed (total)", tick: formatCompact, minStep: 1 },
    series: [
      { key: "held", label: "views held back", colour: colours.amber, value: (s) => s.views_held_per_s, format: perSecond },
      { key: "errors", label: "protocol errors", colour: colours.red, value: (s) => s.protocol_errors_per_s, format: perSecond },
      { key: "slow", label: "slow consumers", colour: colours.grey, value: (s) => s.slow_consumers, format: count, axis: "right", dashed: true },
    ],
  },
  {
    id: "memory",
    title: "Memory and processes",
    note: "Memory the BEAM uses (all kinds), and its process count.",
    left: { label: "MB", tick: formatCompact, minStep: 1 },
    right: { label: "processes", tick: formatCompact, minStep: 1 },
    series: [
      { key: "memory", label: "memory", colour: colours.violet, value: (s) => s.memory_mb, format: (v) => (v === null ? "–" : `${formatNumber(v)} MB`) },
      { key: "processes", label: "processes", colour: colours.teal, value: (s) => s.processes, format: count, axis: "right" },
    ],
  },
  {
    id: "schedulers",
    title: "Schedulers",
    note: "Processes waiting for a scheduler, and how busy the schedulers were (normal schedulers, averaged).",
    left: { label: "run queue", tick: formatCompact, minStep: 1 },
    right: { label: "utilization %", tick: (v) => `${formatCompact(v)}%`, max: 100 },
    series: [
      { key: "runq", label: "run queue", colour: colours.amber, value: (s) => s.run_queue, format: count },
      {
        key: "util",
        label: "utilization",
        colour: colours.blue,
        value: (s) => (s.scheduler_utilization === null ? null : s.scheduler_utilization * 100),
        format: percent,
        axis: "right",
      },
    ],
  },
  {
    id: "zones",
    title: "Zones",
    note: "The longest zone mailbox, and the 99th percentile of the time a zone takes for its tick.",
    left: { label: "messages", tick: formatCompact, minStep: 1 },
    right: { label: "tick ms", tick: msTick },
    series: [
      { key: "mailbox", label: "mailbox max", colour: colours.red, value: (s) => s.zone_mailbox_max, format: count },
      { key: "tick", label: "tick p99", colour: colours.green, value: (s) => s.tick_p99_ms, format: ms, axis: "right" },
    ],
  },
];
