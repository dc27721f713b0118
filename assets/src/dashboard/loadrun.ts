// The load-run panel: what the load lab last reported, while it keeps
// reporting (the server forgets a run 15 s after its last report), with the
// knee, the player count past which the world stops keeping up, up front.
import { formatClock, formatMs, formatNumber, type Sample } from "./data";

function row(list: HTMLElement, id: string, term: string, value: string): void {
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.id = id;
  dd.textContent = value;
  list.append(dt, dd);
}

export class LoadRunPanel {
  private key = "";

  constructor(private readonly element: HTMLElement) {}

  /** Shows the latest sample's load run, or that none is going (and the last one seen). */
  update(latest: Sample | undefined, lastWithRun: Sample | undefined): void {
    const run = latest?.load_run ?? null;
    const key = JSON.stringify([run, run ? null : lastWithRun?.t, run ? null : lastWithRun?.load_run]);
    if (key === this.key) return;
    this.key = key;
    const body = document.createDocumentFragment();

    if (run && latest) {
      this.element.dataset.state = "running";
      this.element.dataset.knee = run.knee === null ? "" : String(run.knee);
      const knee = document.createElement("p");
      knee.id = "loadrun-knee";
      knee.className = run.knee === null ? "knee pending" : "knee found";
      if (run.knee === null) {
        knee.textContent = "No knee yet: the world is keeping up.";
      } else {
        knee.append("Knee at ");
        const strong = document.createElement("strong");
        strong.textContent = formatNumber(run.knee);
        knee.append(strong, " players");
      }
      const phase = document.createElement("p");
      phase.className = "phase";
      const badge = document.createElement("span");
      badge.id = "loadrun-phase";
      badge.className = `badge ${run.phase === "steady" ? "steady" : "ramp"}`;
      badge.textContent = run.phase ?? "unknown phase";
      phase.append(badge, ` reported ${formatClock(latest.t)}`);

      const list = document.createElement("dl");
      list.className = "figures";
      row(list, "loadrun-players", "Players", formatNumber(run.players));
      row(list, "loadrun-moves", "Moves/s", formatNumber(run.moves_per_s));
      row(list, "loadrun-p50", "p50", formatMs(run.p50_ms));
      row(list, "loadrun-p99", "p99", formatMs(run.p99_ms));
      row(list, "loadrun-errors", "Errors", formatNumber(run.errors));
      list.querySelector("#loadrun-errors")?.classList.toggle("bad", (run.errors ?? 0) > 0);
      body.append(knee, phase, list);
    } else {
      this.element.dataset.state = "idle";
      this.element.dataset.knee = "";
      const none = document.createElement("p");
      none.id = "loadrun-none";
      none.className = "none";
      none.textContent = "No load run is going.";
      body.append(none);
      const last = lastWithRun?.load_run;
      if (lastWithRun && last) {
        const previous = document.createElement("p");
        previous.className = "previous";
        const knee = last.knee === null ? "no knee found" : `knee at ${formatNumber(last.knee)} players`;
        previous.textContent = `The last report came at ${formatClock(lastWithRun.t)}: ${formatNumber(last.players)} players, ${formatNumber(last.moves_per_s)} moves/s, ${knee}.`;
        body.append(previous);
      } else {
        const hint = document.createElement("p");
        hint.className = "previous";
        hint.textContent = "Runs of the load lab report here while they go (POST /api/load/report).";
        body.append(hint);
      }
    }
    this.element.querySelector(".loadrun-body")?.replaceChildren(body);
  }
}
