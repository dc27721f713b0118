// A time-series line chart in SVG: one or two value axes, a time axis,
// a legend with each series' current value, and a cursor that follows the
// mouse (shared by every chart on the page, through onHover).
import {
  alignedTicks,
  decimate,
  formatClock,
  maxOf,
  nearestIndex,
  niceTicks,
  seriesRuns,
  timeTicks,
  type Sample,
} from "./data";

export interface AxisSpec {
  /** The unit, written along the axis: "moves/s", "ms", "bytes/s". */
  label: string;
  /** Tick label. */
  tick: (value: number) => string;
  /** The smallest step between ticks (1 for things counted). */
  minStep?: number;
  /** A fixed top (100 for percentages) instead of the data's maximum. */
  max?: number;
}

export interface SeriesSpec {
  key: string;
  label: string;
  colour: string;
  value: (sample: Sample) => number | null;
  /** The current value as the legend writes it, unit included. */
  format: (value: number | null) => string;
  axis?: "left" | "right";
  dashed?: boolean;
}

export interface ChartSpec {
  id: string;
  title: string;
  /** One line under the title: what the chart tells an operator. */
  note: string;
  left: AxisSpec;
  right?: AxisSpec;
  series: SeriesSpec[];
}

const HEIGHT = 190;
const MARGIN = { top: 12, bottom: 24, left: 58, right: 16, rightAxis: 58 };
const SVG_NS = "http://www.w3.org/2000/svg";

function escape(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

interface View {
  samples: readonly Sample[];
  start: number;
  end: number;
  latest: Sample | undefined;
}

interface Geometry {
  width: number;
  plotLeft: number;
  plotRight: number;
  plotTop: number;
  plotBottom: number;
  leftTop: number;
  rightTop: number;
}

export class Chart {
  readonly element: HTMLElement;
  private readonly svg: SVGSVGElement;
  private readonly plot: SVGGElement;
  private readonly cursor: SVGGElement;
  private readonly hoverLabel: HTMLElement;
  private readonly values = new Map<string, HTMLElement>();
  private view: View = { samples: [], start: 0, end: 0, latest: undefined };
  private geometry: Geometry | undefined;
  private hoverT: number | null = null;

  constructor(
    private readonly spec: ChartSpec,
    onHover: (t: number | null) => void,
  ) {
    this.element = el("section", "chart");
    this.element.id = `chart-${spec.id}`;
    this.element.dataset.chart = spec.id;

    const header = el("header");
    header.append(el("h2", undefined, spec.title), (this.hoverLabel = el("span", "chart-time")));
    this.element.append(header, el("p", "chart-note", spec.note));

    this.svg = document.createElementNS(SVG_NS, "svg");
    this.svg.setAttribute("class", "chart-svg");
    this.svg.setAttribute("height", String(HEIGHT));
    this.svg.setAttribute("role", "img");
    this.svg.setAttribute("aria-label", `${spec.title}: ${spec.series.map((s) => s.label).join(", ")} over time`);
    this.plot = document.createElementNS(SVG_NS, "g");
    this.cursor = document.createElementNS(SVG_NS, "g");
    this.cursor.setAttribute("class", "cursor");
    this.svg.append(this.plot, this.cursor);
    this.element.append(this.svg);

    const legend = el("ul", "legend");
    for (const series of spec.series) {
      const item = el("li");
      item.dataset.series = series.key;
      const swatch = el("span", series.dashed ? "swatch dashed" : "swatch");
      swatch.style.setProperty("--colour", series.colour);
      const value = el("span", "value", "–");
      this.values.set(series.key, value);
      item.append(swatch, el("span", "label", series.label), value);
      legend.append(item);
    }
    this.element.append(legend);

    this.svg.addEventListener("pointermove", (event) => {
      const g = this.geometry;
      if (!g || this.view.samples.length === 0) return;
      const box = this.svg.getBoundingClientRect();
      const x = event.clientX - box.left;
      if (x < g.plotLeft || x > g.plotRight) return onHover(null);
      onHover(this.view.start + ((x - g.plotLeft) / (g.plotRight - g.plotLeft)) * (this.view.end - this.view.start));
    });
    this.svg.addEventListener("pointerleave", () => onHover(null));
  }

  /** Draws the samples (already cut to [start, end]); `latest` is the newest sample known. */
  update(samples: readonly Sample[], start: number, end: number, latest: Sample | undefined): void {
    this.view = { samples, start, end, latest };
    this.render();
  }

  /** Redraws at the current size (after a resize). */
  render(): void {
    const width = Math.max(240, Math.round(this.svg.clientWidth || this.element.clientWidth || 480));
    this.svg.setAttribute("width", String(width));
    this.svg.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
    const { spec } = this;
    const { samples, start, end } = this.view;
    const leftSeries = spec.series.filter((s) => s.axis !== "right");
    const rightSeries = spec.series.filter((s) => s.axis === "right");

    const plotLeft = MARGIN.left;
    const plotRight = width - (spec.right ? MARGIN.rightAxis : MARGIN.right);
    const plotTop = MARGIN.top;
    const plotBottom = HEIGHT - MARGIN.bottom;
    const plotWidth = Math.max(1, plotRight - plotLeft);

    const leftTicks =
      spec.left.max !== undefined
        ? alignedTicks(spec.left.max, 4, spec.left.minStep)
        : niceTicks(maxOf(samples, leftSeries.map((s) => s.value)), 4, spec.left.minStep);
    const divisions = leftTicks.length - 1;
    const rightTicks = spec.right
      ? alignedTicks(spec.right.max ?? maxOf(samples, rightSeries.map((s) => s.value)), divisions, spec.right.minStep)
      : [];
    const leftTop = leftTicks[leftTicks.length - 1] ?? 1;
    const rightTop = rightTicks[rightTicks.length - 1] ?? 1;
    this.geometry = { width, plotLeft, plotRight, plotTop, plotBottom, leftTop, rightTop };

    const span = Math.max(1, end - start);
    const x = (t: number) => plotLeft + ((t - start) / span) * plotWidth;
    const y = (v: number, top: number) => plotBottom - (Math.min(v, top * 1.02) / top) * (plotBottom - plotTop);
    const parts: string[] = [];

    // Grid and value axes.
    leftTicks.forEach((tick, i) => {
      const ty = y(tick, leftTop).toFixed(1);
      parts.push(`<line class="grid${i === 0 ? " base" : ""}" x1="${plotLeft}" x2="${plotRight}" y1="${ty}" y2="${ty}"/>`);
      parts.push(`<text class="tick" x="${plotLeft - 6}" y="${ty}" text-anchor="end" dominant-baseline="middle">${escape(spec.left.tick(tick))}</text>`);
      const right = rightTicks[i];
      if (spec.right && right !== undefined) {
        parts.push(`<text class="tick" x="${plotRight + 6}" y="${ty}" dominant-baseline="middle">${escape(spec.right.tick(right))}</text>`);
      }
    });
    const middle = ((plotTop + plotBottom) / 2).toFixed(1);
    parts.push(`<text class="axis-label" transform="translate(13 ${middle}) rotate(-90)" text-anchor="middle">${escape(spec.left.label)}</text>`);
    if (spec.right) {
      parts.push(`<text class="axis-label" transform="translate(${width - 8} ${middle}) rotate(90)" text-anchor="middle">${escape(spec.right.label)}</text>`);
    }

    // Time axis.
    const withSeconds = span <= 5 * 60 * 1000 + 1;
    for (const tick of timeTicks(start, end, Math.max(2, Math.floor(plotWidth / 90)))) {
      const tx = x(tick).toFixed(1);
      parts.push(`<line class="grid time" x1="${tx}" x2="${tx}" y1="${plotTop}" y2="${plotBottom}"/>`);
      parts.push(`<text class="tick" x="${tx}" y="${plotBottom + 15}" text-anchor="middle">${formatClock(tick, withSeconds && tick % 60000 !== 0)}</text>`);
    }

    // Series, the first on top (drawn last).
    let points = 0;
    let plotted = 0;
    for (const series of [...spec.series].reverse()) {
      const top = series.axis === "right" ? rightTop : leftTop;
      let d = "";
      for (const run of seriesRuns(samples, series.value)) {
        const thin = decimate(run, Math.ceil(plotWidth / 2));
        thin.forEach(([t, v], i) => {
          d += `${i === 0 ? "M" : "L"}${x(t).toFixed(1)} ${y(v, top).toFixed(1)}`;
        });
        // A lone point is a dot (a zero-length line with round caps).
        if (thin.length === 1) d += "l0.01 0";
        points += thin.length;
      }
      if (d) plotted++;
      parts.push(
        `<path class="series${series.dashed ? " dashed" : ""}" data-series="${series.key}" stroke="${series.colour}" d="${d}"/>`,
      );
    }
    if (samples.length === 0) {
      parts.push(`<text class="empty" x="${(plotLeft + plotRight) / 2}" y="${middle}" text-anchor="middle">waiting for data…</text>`);
    }
    this.plot.innerHTML = parts.join("");
    this.element.dataset.points = String(points);
    this.element.dataset.series = String(plotted);
    this.element.dataset.lastT = String(this.view.latest?.t ?? 0);
    this.drawCursor();
  }

  /** Moves the shared cursor to time t (or removes it), and shows its values in the legend. */
  setHover(t: number | null): void {
    this.hoverT = t;
    this.drawCursor();
  }

  private drawCursor(): void {
    const g = this.geometry;
    const { samples, start, end, latest } = this.view;
    const index = this.hoverT === null ? -1 : nearestIndex(samples, this.hoverT);
    const hovered = index >= 0 ? samples[index] : undefined;
    const shown = hovered ?? latest;
    for (const series of this.spec.series) {
      const value = this.values.get(series.key);
      if (value) {
        const text = shown ? series.format(series.value(shown)) : "–";
        if (value.textContent !== text) value.textContent = text;
      }
    }
    this.hoverLabel.textContent = hovered ? `at ${formatClock(hovered.t)}` : "";
    if (!g || !hovered) {
      this.cursor.innerHTML = "";
      return;
    }
    const span = Math.max(1, end - start);
    const cx = g.plotLeft + ((hovered.t - start) / span) * (g.plotRight - g.plotLeft);
    const parts = [`<line x1="${cx.toFixed(1)}" x2="${cx.toFixed(1)}" y1="${g.plotTop}" y2="${g.plotBottom}"/>`];
    for (const series of this.spec.series) {
      const v = series.value(hovered);
      if (v === null) continue;
      const top = series.axis === "right" ? g.rightTop : g.leftTop;
      const cy = g.plotBottom - (Math.min(v, top * 1.02) / top) * (g.plotBottom - g.plotTop);
      parts.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="3" fill="${series.colour}"/>`);
    }
    this.cursor.innerHTML = parts.join("");
  }
}
