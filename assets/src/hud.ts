import type { ConnectionState } from "@grove/client";
import { Hint } from "./hint";
import type { Stats } from "@grove/client";

const stateLabels: Record<ConnectionState, string> = {
  connecting: "connecting…",
  connected: "connected",
  reconnecting: "reconnecting…",
  stopped: "signed in elsewhere",
};

const count = new Intl.NumberFormat("en");

function element(id: string): HTMLElement {
  const found = document.getElementById(id);
  if (!found) throw new Error(`index.html lacks #${id}`);
  return found;
}

/** The panel of numbers beside the world; writes only what changed. */
export class Hud {
  private readonly state = element("hud-state");
  private readonly position = element("hud-position");
  private readonly players = element("hud-players");
  private readonly actors = element("hud-actors");
  private readonly latency = element("hud-latency");
  private readonly moves = element("hud-moves");
  private readonly hintLine = element("hint");
  private readonly hint = new Hint((text) => {
    if (text !== undefined) write(this.hintLine, text);
    this.hintLine.classList.toggle("shown", text !== undefined);
  });

  setState(state: ConnectionState): void {
    this.state.dataset.state = state;
    write(this.state, stateLabels[state]);
  }

  setPosition(x: number, y: number): void {
    write(this.position, `${x}, ${y}`);
  }

  setStats(stats: Stats): void {
    write(this.players, count.format(stats.players));
    write(this.actors, count.format(stats.actors));
    write(this.moves, count.format(stats.moves_per_s));
  }

  setRoundTrip(milliseconds: number): void {
    write(this.latency, `${milliseconds < 10 ? milliseconds.toFixed(1) : Math.round(milliseconds)} ms`);
  }

  /** A short-lived line under the numbers, e.g. what the server said. */
  flash(text: string): void {
    this.hint.show(text);
  }

  /** A move's outcome: a refusal says why under the numbers, a later success takes that away. */
  moveSettled(seq: number, refusal: string | undefined): void {
    this.hint.settle(seq, refusal);
  }
}

function write(target: HTMLElement, text: string): void {
  if (target.textContent !== text) target.textContent = text;
}
