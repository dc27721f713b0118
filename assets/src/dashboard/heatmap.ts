// The zones at a glance: one SVG cell per zone, laid out like the world,
// coloured by its moves per second over the last second (or, as the second
// layer, by its mailbox). Every cell's tooltip gives both numbers.
import { formatNumber, type Zones } from "./data";

export type HeatLayer = "moves" | "mailbox";

const SVG_NS = "http://www.w3.org/2000/svg";

// Dark violet through red and orange to pale yellow, as on the game's minimap.
const heatStops: [number, [number, number, number]][] = [
  [0, [38, 24, 70]],
  [0.3, [150, 40, 120]],
  [0.65, [245, 125, 40]],
  [1, [255, 245, 180]],
];
// Mailboxes: from calm blue-grey to alarm red.
const mailboxStops: [number, [number, number, number]][] = [
  [0, [32, 48, 58]],
  [0.4, [170, 80, 60]],
  [1, [255, 70, 60]],
];

/** The colour at t (0..1) along the stops. */
export function rampColour(stops: [number, [number, number, number]][], t: number): string {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
  let upper = 1;
  while (upper < stops.length - 1 && stops[upper]![0] < x) upper++;
  const [t0, c0] = stops[upper - 1]!;
  const [t1, c1] = stops[upper]!;
  const f = t1 === t0 ? 0 : (x - t0) / (t1 - t0);
  const channel = (i: number) => Math.round(c0[i]! + (c1[i]! - c0[i]!) * f);
  return `rgb(${channel(0)}, ${channel(1)}, ${channel(2)})`;
}

function gradient(stops: [number, [number, number, number]][]): string {
  return `linear-gradient(to right, ${stops.map(([t]) => `${rampColour(stops, t)} ${Math.round(t * 100)}%`).join(", ")})`;
}

export class HeatMap {
  private layer: HeatLayer = "moves";
  private zones: Zones | undefined;
  private world = { width: 0, height: 0 };
  private cells: SVGRectElement[] = [];
  private labels: SVGTextElement[] = [];
  private titles: SVGTitleElement[] = [];
  private shape = "";
  // The colour scale's top, which falls slowly, so that the colours do not
  // flicker with every second's noise.
  private scaleMoves = 1;
  private scaleMailbox = 10;

  constructor(
    private readonly svg: SVGSVGElement,
    private readonly legend: HTMLElement,
    private readonly summary: HTMLElement,
  ) {}

  setLayer(layer: HeatLayer): void {
    this.layer = layer;
    this.draw();
  }

  update(zones: Zones, world: { width: number; height: number }): void {
    this.zones = zones;
    this.world = world;
    const movesMax = Math.max(0, ...zones.moves_per_s);
    const mailboxMax = Math.max(0, ...zones.mailbox);
    this.scaleMoves = Math.max(1, movesMax, this.scaleMoves * 0.9);
    this.scaleMailbox = Math.max(10, mailboxMax, this.scaleMailbox * 0.9);
    this.draw();
  }

  private build(zones: Zones): void {
    const size = zones.zone_size || 1;
    const width = this.world.width || zones.cols * size;
    const height = this.world.height || zones.rows * size;
    this.svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    this.svg.replaceChildren();
    this.cells = [];
    this.labels = [];
    this.titles = [];
    const showLabels = zones.cols * zones.rows <= 100;
    for (let row = 0; row < zones.rows; row++) {
      for (let col = 0; col < zones.cols; col++) {
        const x = col * size;
        const y = row * size;
        const w = Math.max(0, Math.min(size, width - x));
        const h = Math.max(0, Math.min(size, height - y));
        const rect = document.createElementNS(SVG_NS, "rect");
        rect.setAttribute("class", "zone");
        rect.setAttribute("x", String(x));
        rect.setAttribute("y", String(y));
        rect.setAttribute("width", String(w));
        rect.setAttribute("height", String(h));
        rect.dataset.col = String(col);
        rect.dataset.row = String(row);
        const title = document.createElementNS(SVG_NS, "title");
        rect.append(title);
        this.svg.append(rect);
        this.cells.push(rect);
        this.titles.push(title);
        if (showLabels) {
          const label = document.createElementNS(SVG_NS, "text");
          label.setAttribute("class", "zone-label");
          label.setAttribute("x", String(x + w / 2));
          label.setAttribute("y", String(y + h / 2));
          label.setAttribute("text-anchor", "middle");
          label.setAttribute("dominant-baseline", "central");
          label.setAttribute("font-size", String(Math.min(w, h) * (zones.cols > 6 ? 0.3 : 0.22)));
          this.svg.append(label);
          this.labels.push(label);
        }
      }
    }
  }

  private draw(): void {
    const zones = this.zones;
    if (!zones) return;
    const shape = `${zones.cols}x${zones.rows}x${zones.zone_size}x${this.world.width}x${this.world.height}`;
    if (shape !== this.shape) {
      this.build(zones);
      this.shape = shape;
    }
    const size = zones.zone_size || 1;
    let busiest = -1;
    let total = 0;
    let mailboxMax = 0;
    this.cells.forEach((rect, i) => {
      const moves = zones.moves_per_s[i] ?? 0;
      const mailbox = zones.mailbox[i] ?? 0;
      total += moves;
      mailboxMax = Math.max(mailboxMax, mailbox);
      if (busiest < 0 || moves > (zones.moves_per_s[busiest] ?? 0)) busiest = i;
      const byMoves = this.layer === "moves";
      rect.setAttribute(
        "fill",
        byMoves ? rampColour(heatStops, moves / this.scaleMoves) : rampColour(mailboxStops, mailbox / this.scaleMailbox),
      );
      rect.classList.toggle("backlog", byMoves && mailbox > 0);
      rect.dataset.moves = String(moves);
      rect.dataset.mailbox = String(mailbox);
      const col = i % zones.cols;
      const row = Math.floor(i / zones.cols);
      const lastX = Math.min((col + 1) * size, this.world.width || Infinity) - 1;
      const lastY = Math.min((row + 1) * size, this.world.height || Infinity) - 1;
      const title = `zone ${i} (column ${col}, row ${row}), cells ${col * size}–${lastX} × ${row * size}–${lastY}\n${formatNumber(moves)} moves/s\nmailbox ${formatNumber(mailbox)}`;
      const titleNode = this.titles[i];
      if (titleNode && titleNode.textContent !== title) titleNode.textContent = title;
      const label = this.labels[i];
      if (label) {
        label.textContent = byMoves ? formatNumber(moves) : formatNumber(mailbox);
        label.classList.toggle("dark", (byMoves ? moves / this.scaleMoves : 0) > 0.6);
      }
    });

    const stops = this.layer === "moves" ? heatStops : mailboxStops;
    const top = this.layer === "moves" ? this.scaleMoves : this.scaleMailbox;
    this.legend.style.setProperty("--ramp", gradient(stops));
    this.legend.dataset.low = "0";
    this.legend.dataset.high = `${formatNumber(Math.round(top))} ${this.layer === "moves" ? "moves/s" : "messages"}`;

    const col = busiest % zones.cols;
    const row = Math.floor(busiest / zones.cols);
    this.summary.textContent =
      zones.cols * zones.rows === 0
        ? "no zones"
        : `${zones.cols} × ${zones.rows} zones of ${size} × ${size} cells · ${formatNumber(total)} moves/s in all · busiest zone ${busiest} (column ${col}, row ${row}) at ${formatNumber(zones.moves_per_s[busiest] ?? 0)} moves/s · longest mailbox ${formatNumber(mailboxMax)}`;
  }
}
