import { terrainKinds, type TerrainKind } from "@grove/client";

/** The world's static ground, one byte per cell, as `GET /terrain` serves it. */
export class Terrain {
  constructor(
    readonly width: number,
    readonly height: number,
    private readonly cells: Uint8Array,
  ) {}

  /** The ground at a cell, or undefined outside the world. */
  at(x: number, y: number): TerrainKind | undefined {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return undefined;
    return terrainKinds[this.cells[y * this.width + x] ?? 0] ?? "meadow";
  }

  /** The raw cell code at a cell (0 outside the world), for the minimap. */
  code(x: number, y: number): number {
    return this.cells[y * this.width + x] ?? 0;
  }
}

/**
 * Fetches the whole world's terrain from the page's own server, for the
 * minimap; undefined for a world too large to be sent whole (404), whose
 * ground comes area by area with the areas.
 */
export async function fetchTerrain(): Promise<Terrain | undefined> {
  // no-store: after a server restart the world may have new ground.
  const response = await fetch("/terrain", { cache: "no-store" });
  if (response.status === 404) return undefined;
  if (!response.ok) throw new Error(`GET /terrain answered ${response.status}`);
  const width = Number(response.headers.get("x-grove-width"));
  const height = Number(response.headers.get("x-grove-height"));
  const cells = new Uint8Array(await response.arrayBuffer());
  if (!(width > 0 && height > 0) || cells.byteLength !== width * height) {
    throw new Error(`GET /terrain sent ${cells.byteLength} bytes for ${width} x ${height} cells`);
  }
  return new Terrain(width, height, cells);
}
