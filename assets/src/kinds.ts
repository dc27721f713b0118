import { PLAYER } from "@grove/client";

/** One entry of `GET /kinds`: an entity kind code, its name and emoji ("" for none). */
export interface Kind {
  code: number;
  name: string;
  emoji: string;
}

// Actors without an emoji of their kind get a face from their id, so one
// can be followed with the eye.
const actorFaces = ["🐞", "🐭", "🐇", "🦔", "🐢", "🐝", "🦆", "🐌", "🐿️", "🐸"];
export const playerEmoji = "🙂";

/**
 * How entities are drawn, from the legend the server gives: each actor
 * kind with its emoji. A code the legend does not name (or before it
 * arrived) is drawn as an actor, never as a player.
 */
export class Kinds {
  private emoji = new Map<number, string>();

  constructor(kinds: readonly Kind[] = []) {
    for (const kind of kinds) if (kind.emoji) this.emoji.set(kind.code, kind.emoji);
  }

  isPlayer(code: number): boolean {
    return code === PLAYER;
  }

  /** The emoji for an entity of kind `code` with id `id`. */
  draw(code: number, id: number): string {
    if (code === PLAYER) return playerEmoji;
    return this.emoji.get(code) ?? (actorFaces[id % actorFaces.length] as string);
  }
}

/** Parses a `GET /kinds` body, skipping what is malformed. */
export function parseKinds(body: unknown): Kind[] {
  const list = (body as { kinds?: unknown } | null)?.kinds;
  if (!Array.isArray(list)) return [];
  const kinds: Kind[] = [];
  for (const item of list) {
    const { code, name, emoji } = (item ?? {}) as Record<string, unknown>;
    if (typeof code === "number" && typeof name === "string" && typeof emoji === "string") kinds.push({ code, name, emoji });
  }
  return kinds;
}

/** Fetches the legend from the page's own server. */
export async function fetchKinds(): Promise<Kinds> {
  const response = await fetch("/kinds", { cache: "no-store" });
  if (!response.ok) throw new Error(`GET /kinds answered ${response.status}`);
  return new Kinds(parseKinds(await response.json()));
}
