import type { Colonies, Density, Places } from "@grove/client";
import type { Terrain } from "./terrain";

// Ground colours by terrain code (meadow, tree, rock, water, flowers), drawn
// faintly under the heat so that crowds can be told from lakes.
const groundColours: [number, number, number][] = [
  [70, 120, 60],
  [28, 72, 34],
  [120, 120, 120],
  [40, 90, 170],
  [110, 150, 70],
];

// Heat palette stops, dark violet through orange to pale yellow.
const heatStops: [number, [number, number, number]][] = [
  [0, [60, 10, 110]],
  [0.35, [190, 40, 110]],
  [0.7, [250, 140, 30]],
  [1, [255, 250, 190]],
];

const heatPalette = buildPalette();

function buildPalette(): Uint8ClampedArray {
  const palette = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    let upper = 1;
    while (upper < heatStops.length - 1 && heatStops[upper]![0] < t) upper++;
    const [t0, c0] = heatStops[upper - 1]!;
    const [t1, c1] = heatStops[upper]!;
    const f = (t - t0) / (t1 - t0);
    for (let c = 0; c < 3; c++) palette[i * 3 + c] = c0[c]! + (c1[c]! - c0[c]!) * f;
  }
  return palette;
}

// In a world too large to picture whole, the minimap shows this many zones
// a side around the player, each this many pixels.
const regionZones = 32;
const zonePixels = 8;

/** What the minimap of a world too large to picture whole shows now. */
export type Region = {
  /** The zone at the region's top left corner, and its side in zones. */
  col: number;
  row: number;
  zones: number;
  zoneSize: number;
  /** The populated places inside the region, as [column, row, entities], and how many lie outside it. */
  inside: [number, number, number][];
  outside: number;
};

/**
 * The whole world at a glance: a live 2D histogram of where entities are,
 * from `density` messages, over a faint picture of the ground, with the
 * player's viewport marked. A world too large for that (the server sends
 * `places` instead) is drawn as the 32 x 32 zones around the player, its
 * populated places among them as heat, and those further away as marks on
 * the edge, in their direction.
 */
export class Minimap {
  private readonly context: CanvasRenderingContext2D;
  private places: Places | undefined;
  private ground: HTMLCanvasElement | undefined;
  private heat: HTMLCanvasElement | undefined;
  private colonies: HTMLCanvasElement | undefined;
  private player: { x: number; y: number; radius: number; width: number; height: number } | undefined;

  constructor(private readonly canvas: HTMLCanvasElement) {
    this.context = canvas.getContext("2d") as CanvasRenderingContext2D;
  }

  setTerrain(terrain: Terrain): void {
    this.fitTo(terrain.width, terrain.height);
    const { width, height } = this.canvas;
    const ground = document.createElement("canvas");
    ground.width = width;
    ground.height = height;
    const image = new ImageData(width, height);
    for (let py = 0; py < height; py++) {
      const y = Math.floor(((py + 0.5) * terrain.height) / height);
      for (let px = 0; px < width; px++) {
        const x = Math.floor(((px + 0.5) * terrain.width) / width);
        const colour = groundColours[terrain.code(x, y)] ?? groundColours[0]!;
        const at = (py * width + px) * 4;
        image.data[at] = colour[0];
        image.data[at + 1] = colour[1];
        image.data[at + 2] = colour[2];
        image.data[at + 3] = 255;
      }
    }
    ground.getContext("2d")?.putImageData(image, 0, 0);
    this.ground = ground;
    this.draw();
  }

  setDensity(density: Density): void {
    const { cols, rows, cells } = density;
    if (cols === 0 || rows === 0 || cells.byteLength < cols * rows) return;
    let max = 0;
    for (let i = 0; i < cols * rows; i++) max = Math.max(max, cells[i]!);
    // A square-root scale relative to the busiest block: a sparse world
    // still shows its herds, a crowded one its hot spots. Quiet blocks stay
    // see-through so the ground shows.
    const top = Math.max(max, 8);

    const heat = this.heat ?? document.createElement("canvas");
    heat.width = cols;
    heat.height = rows;
    const image = new ImageData(cols, rows);
    for (let i = 0; i < cols * rows; i++) {
      const value = cells[i]!;
      if (value === 0) continue;
      const level = Math.min(255, Math.round(Math.sqrt(value / top) * 255));
      image.data[i * 4] = heatPalette[level * 3]!;
      image.data[i * 4 + 1] = heatPalette[level * 3 + 1]!;
      image.data[i * 4 + 2] = heatPalette[level * 3 + 2]!;
      image.data[i * 4 + 3] = 30 + (level * 225) / 255;
    }
    heat.getContext("2d")?.putImageData(image, 0, 0);
    this.heat = heat;
    this.draw();
  }

  /**
   * Bacteria (🦠) as a layer of their own, in bright green over the heat:
   * where colonies live, whatever the crowds.
   */
  setColonies(colonies: Colonies): void {
    const { cols, rows, cells } = colonies;
    if (cols === 0 || rows === 0 || cells.byteLength < cols * rows) return;
    const layer = this.colonies ?? document.createElement("canvas");
    layer.width = cols;
    layer.height = rows;
    const image = new ImageData(cols, rows);
    for (let i = 0; i < cols * rows; i++) {
      const value = cells[i]!;
      if (value === 0) continue;
      image.data[i * 4] = 120;
      image.data[i * 4 + 1] = 255;
      image.data[i * 4 + 2] = 60;
      image.data[i * 4 + 3] = Math.min(255, 60 + Math.round(Math.sqrt(value / 255) * 195));
    }
    layer.getContext("2d")?.putImageData(image, 0, 0);
    this.colonies = layer;
    this.draw();
  }

  /** The busiest zones of a world too large to picture whole: from now on, the minimap is drawn around the player. */
  setPlaces(places: Places): void {
    this.places = places;
    this.draw();
  }

  setPlayer(x: number, y: number, radius: number, width: number, height: number): void {
    const player = this.player;
    if (player && player.x === x && player.y === y && player.radius === radius) return;
    this.player = { x, y, radius, width, height };
    this.fitTo(width, height);
    this.draw();
  }

  /** The region drawn around the player, or undefined while the whole world is. */
  region(): Region | undefined {
    const { places, player } = this;
    if (!places || !player || places.zone_size === 0) return undefined;
    const size = places.zone_size;
    // The player's zone in the middle, the region kept inside the world.
    const zonesX = Math.ceil(player.width / size);
    const zonesY = Math.ceil(player.height / size);
    const half = regionZones / 2;
    const col = Math.max(0, Math.min(Math.floor(player.x / size) - half, zonesX - regionZones));
    const row = Math.max(0, Math.min(Math.floor(player.y / size) - half, zonesY - regionZones));
    const inside = places.places.filter(
      ([c, r]) => c >= col && c < col + regionZones && r >= row && r < row + regionZones,
    );
    return { col, row, zones: regionZones, zoneSize: size, inside, outside: places.places.length - inside.length };
  }

  private fitTo(worldWidth: number, worldHeight: number): void {
    if (this.places) {
      const side = regionZones * zonePixels;
      if (this.canvas.width !== side || this.canvas.height !== side) {
        this.canvas.width = side;
        this.canvas.height = side;
      }
      return;
    }
    // The longer side is 240 pixels; CSS scales the canvas to the panel.
    const longest = 240;
    const width = worldWidth >= worldHeight ? longest : Math.max(1, Math.round((longest * worldWidth) / worldHeight));
    const height = worldHeight >= worldWidth ? longest : Math.max(1, Math.round((longest * worldHeight) / worldWidth));
    if (this.canvas.width !== width || this.canvas.height !== height) {
      this.canvas.width = width;
      this.canvas.height = height;
    }
  }

  private draw(): void {
    if (this.places) return this.drawRegion();
    const { context, canvas } = this;
    context.fillStyle = "#10151a";
    context.fillRect(0, 0, canvas.width, canvas.height);
    if (this.ground) {
      context.imageSmoothingEnabled = false;
      context.globalAlpha = 0.5;
      context.drawImage(this.ground, 0, 0, canvas.width, canvas.height);
      context.globalAlpha = 1;
    }
    if (this.heat) {
      // Smoothed: blocks blend into a heat map rather than a checkerboard.
      context.imageSmoothingEnabled = true;
      context.drawImage(this.heat, 0, 0, canvas.width, canvas.height);
    }
    if (this.colonies) {
      context.imageSmoothingEnabled = false;
      context.drawImage(this.colonies, 0, 0, canvas.width, canvas.height);
    }

    const player = this.player;
    if (player && player.width > 0 && player.height > 0) {
      const sx = canvas.width / player.width;
      const sy = canvas.height / player.height;
      const side = 2 * player.radius + 1;
      context.strokeStyle = "rgba(255, 255, 255, 0.9)";
      context.lineWidth = 1;
      context.strokeRect(
        (player.x - player.radius) * sx,
        (player.y - player.radius) * sy,
        Math.max(3, side * sx),
        Math.max(3, side * sy),
      );
      context.fillStyle = "#ffffff";
      context.strokeStyle = "#10151a";
      context.lineWidth = 1.5;
      context.beginPath();
      context.arc((player.x + 0.5) * sx, (player.y + 0.5) * sy, 3.5, 0, Math.PI * 2);
      context.fill();
      context.stroke();
    }
  }

  private drawRegion(): void {
    const player = this.player;
    if (player) this.fitTo(player.width, player.height);
    const { context, canvas } = this;
    context.fillStyle = "#10151a";
    context.fillRect(0, 0, canvas.width, canvas.height);
    const region = this.region();
    if (!region || !player) return;
    const { col, row, zoneSize } = region;
    const all = this.places?.places ?? [];
    // The same square-root scale as the whole world's heat, against the busiest place.
    const top = Math.max(8, ...all.map(([, , count]) => count));
    const level = (count: number) => Math.min(255, Math.round(Math.sqrt(count / top) * 255));

    // The zones' grid, faintly, so that the scale reads.
    context.strokeStyle = "rgba(255, 255, 255, 0.06)";
    context.lineWidth = 1;
    for (let i = 1; i < regionZones; i++) {
      context.beginPath();
      context.moveTo(i * zonePixels + 0.5, 0);
      context.lineTo(i * zonePixels + 0.5, canvas.height);
      context.moveTo(0, i * zonePixels + 0.5);
      context.lineTo(canvas.width, i * zonePixels + 0.5);
      context.stroke();
    }

    const far = regionZones * zonePixels - 3;
    for (const [c, r, count] of all) {
      const l = level(count);
      const colour = `rgb(${heatPalette[l * 3]}, ${heatPalette[l * 3 + 1]}, ${heatPalette[l * 3 + 2]})`;
      const inside = c >= col && c < col + regionZones && r >= row && r < row + regionZones;
      if (inside) {
        context.fillStyle = colour;
        context.fillRect((c - col) * zonePixels, (r - row) * zonePixels, zonePixels, zonePixels);
      } else {
        // Further away: a mark on the edge, toward it.
        const x = Math.max(0, Math.min((c - col) * zonePixels, far));
        const y = Math.max(0, Math.min((r - row) * zonePixels, far));
        context.fillStyle = colour;
        context.fillRect(x, y, 3, 3);
      }
    }

    // The player's view and the player, in cells.
    const scale = zonePixels / zoneSize;
    const left = (player.x - col * zoneSize) * scale;
    const topY = (player.y - row * zoneSize) * scale;
    const side = (2 * player.radius + 1) * scale;
    context.strokeStyle = "rgba(255, 255, 255, 0.9)";
    context.lineWidth = 1;
    context.strokeRect(left - player.radius * scale, topY - player.radius * scale, Math.max(3, side), Math.max(3, side));
    context.fillStyle = "#ffffff";
    context.strokeStyle = "#10151a";
    context.lineWidth = 1.5;
    context.beginPath();
    context.arc(left + scale / 2, topY + scale / 2, 3.5, 0, Math.PI * 2);
    context.fill();
    context.stroke();
    this.canvas.title = `The ${regionZones} x ${regionZones} zones around you (${zoneSize} cells a side each): ${region.inside.length} populated here, ${region.outside} further away`;
  }
}
