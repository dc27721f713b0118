import type { Label } from "@grove/client";

/** A player in view, as the list shows it. */
export interface NearbyPlayer extends Label {
  id: number;
  /** In cells, the larger of the two axes (a step can be diagonal). */
  distance: number;
}

// How many rows the list shows at most: the nearest.
const MAX_ROWS = 12;

/**
 * The list of the players in view, nearest first, each with its avatar,
 * name and distance; rewritten only when something in it changed.
 */
export class NearbyList {
  private drawn = "";

  constructor(
    private readonly list: HTMLElement,
    private readonly count: HTMLElement,
  ) {}

  render(players: readonly NearbyPlayer[]): void {
    const shown = players.slice(0, MAX_ROWS);
    const signature = `${players.length}|${shown.map((p) => `${p.id}:${p.name}:${p.avatar}:${p.distance}`).join(",")}`;
    if (signature === this.drawn) return;
    this.drawn = signature;
    this.count.textContent = players.length === 0 ? "no one in sight" : `${players.length} in sight`;
    const rows = shown.map((player) => {
      const row = document.createElement("li");
      row.dataset.id = String(player.id);
      const avatar = document.createElement("span");
      avatar.className = "emoji";
      avatar.textContent = player.avatar;
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = player.name;
      const distance = document.createElement("span");
      distance.className = "distance";
      distance.textContent = player.distance === 1 ? "next to you" : `${player.distance} cells`;
      row.append(avatar, name, distance);
      return row;
    });
    this.list.replaceChildren(...rows);
  }
}
