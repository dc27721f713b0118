// The cluster panel: every node of the cluster with the zones it runs, the
// players and actors in those zones and the sessions connected to it, as
// the node that answers the page gathered them a moment ago. A single node
// is a cluster of one.
import { formatNumber, type Cluster, type ClusterMember } from "./data";

function cell(row: HTMLTableRowElement, text: string, field?: string): void {
  const td = document.createElement("td");
  td.textContent = text;
  if (field) td.dataset.field = field;
  row.append(td);
}

function sum(members: readonly ClusterMember[], field: "players" | "actors" | "sessions"): number | null {
  let total = 0;
  for (const member of members) {
    const value = member[field];
    if (value === null) return null;
    total += value;
  }
  return total;
}

export class ClusterPanel {
  private key = "";

  constructor(private readonly element: HTMLElement) {}

  update(cluster: Cluster): void {
    const key = JSON.stringify(cluster);
    if (key === this.key) return;
    this.key = key;
    const members = cluster.members;
    const joined = members.filter((member) => member.member).length;
    this.element.dataset.members = String(joined);

    const summary = document.createElement("p");
    summary.id = "cluster-summary";
    summary.className = "cluster-summary";
    const unreachable = members.filter((member) => !member.reachable).length;
    summary.textContent =
      `${joined === 1 ? "A cluster of one" : `A cluster of ${joined} nodes`} · ${formatNumber(cluster.zone_count)} zones` +
      (unreachable > 0 ? ` · ${unreachable} not answering` : "");

    const table = document.createElement("table");
    table.id = "cluster-table";
    table.className = "cluster-table";
    const head = table.createTHead().insertRow();
    for (const title of ["Node", "Zones", "Players", "Actors", "Sessions"]) {
      const th = document.createElement("th");
      th.textContent = title;
      th.scope = "col";
      head.append(th);
    }
    const body = table.createTBody();
    for (const member of members) {
      const row = body.insertRow();
      row.dataset.node = member.node;
      row.classList.toggle("self", member.self);
      row.classList.toggle("unreachable", !member.reachable);
      row.classList.toggle("leaving", !member.member);
      const name = member.node + (member.self ? " (this one)" : "") + (member.member ? "" : " (leaving)");
      cell(row, name, "node");
      const share = cluster.zone_count > 0 ? ` · ${Math.round((member.zones / cluster.zone_count) * 100)} %` : "";
      cell(row, `${formatNumber(member.zones)}${share}`, "zones");
      cell(row, formatNumber(member.players), "players");
      cell(row, formatNumber(member.actors), "actors");
      cell(row, formatNumber(member.sessions), "sessions");
      if (!member.reachable) row.title = "did not answer in time";
    }
    if (members.length > 1) {
      const foot = table.createTFoot().insertRow();
      foot.dataset.node = "";
      cell(foot, "all", "node");
      cell(foot, formatNumber(members.reduce((total, member) => total + member.zones, 0)), "zones");
      cell(foot, formatNumber(sum(members, "players")), "players");
      cell(foot, formatNumber(sum(members, "actors")), "actors");
      cell(foot, formatNumber(sum(members, "sessions")), "sessions");
    }

    this.element.querySelector(".cluster-body")?.replaceChildren(summary, table);
  }
}
