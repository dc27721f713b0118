/**
 * Grove's wire protocol, version 7 (docs/protocol.md): coordinates, area
 * numbers and entity ids of any size a world may have, each in as few
 * bytes as it needs (`uvar`), each area's ground before its first snapshot
 * on the connection, the areas that changed together in one `areas`
 * message, each entity there placed by its cell counted from its area's
 * corner (`placeEntities`) and with its kind only when it comes into the
 * area, and in JSON every message of the server an array: its tag, then
 * its fields, an enumeration's value as its code (as in binary) and the
 * parts of `areas` spread in its array.
 *
 * Every message is defined once, in `definitions` below, mirroring
 * `lib/grove/protocol.ex`; the JSON and binary encodings are both derived
 * from those definitions by small codec combinators, as on the server, so a
 * field added there is one line added here.
 */

export const PROTOCOL_VERSION = 7;

export type Encoding = "json" | "binary";

/** Why a frame could not be decoded; `code` uses the protocol's error codes. */
export class ProtocolError extends Error {
  constructor(
    readonly code: "bad_json" | "bad_message" | "unknown_type" | "bad_field" | "bad_frame",
    message: string,
  ) {
    super(message);
    this.name = "ProtocolError";
  }
}

// ---------------------------------------------------------------------------
// Binary cursors

class Reader {
  private offset = 0;
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  take(size: number, what: string): number {
    if (this.offset + size > this.bytes.byteLength) {
      throw new ProtocolError("bad_frame", `truncated: expected ${what}`);
    }
    const at = this.offset;
    this.offset += size;
    return at;
  }

  u8(): number {
    return this.view.getUint8(this.take(1, "an integer in 0..255"));
  }

  u16(): number {
    return this.view.getUint16(this.take(2, "an integer in 0..65535"));
  }

  u32(): number {
    return this.view.getUint32(this.take(4, "an integer in 0..4294967295"));
  }

  /** Seven bits a byte, least significant first; at most 2^53 - 1, so a Number holds it. */
  uvar(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      const byte = this.view.getUint8(this.take(1, `an integer in 0..${MAX_UVAR}`));
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) {
        if (value > MAX_UVAR) throw new ProtocolError("bad_frame", `an integer over ${MAX_UVAR}`);
        return value;
      }
      scale *= 128;
    }
    throw new ProtocolError("bad_frame", `an integer over ${MAX_UVAR}`);
  }

  slice(size: number, what: string): Uint8Array {
    const at = this.take(size, what);
    return this.bytes.slice(at, at + size);
  }

  get remaining(): number {
    return this.bytes.byteLength - this.offset;
  }
}

class Writer {
  private bytes: Uint8Array<ArrayBuffer> = new Uint8Array(64);
  private view = new DataView(this.bytes.buffer);
  private length = 0;

  // Returns the offset to write at. Callers must call it before reading
  // this.bytes or this.view, which it may replace with larger ones.
  private reserve(size: number): number {
    if (this.length + size > this.bytes.byteLength) {
      const grown = new Uint8Array(Math.max(this.bytes.byteLength * 2, this.length + size));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.length;
    this.length += size;
    return at;
  }

  u8(n: number): void {
    const at = this.reserve(1);
    this.view.setUint8(at, n);
  }

  u16(n: number): void {
    const at = this.reserve(2);
    this.view.setUint16(at, n);
  }

  u32(n: number): void {
    const at = this.reserve(4);
    this.view.setUint32(at, n);
  }

  uvar(n: number): void {
    while (n >= 0x80) {
      this.u8((n % 0x80) | 0x80);
      n = Math.floor(n / 0x80);
    }
    this.u8(n);
  }

  raw(bytes: Uint8Array): void {
    const at = this.reserve(bytes.byteLength);
    this.bytes.set(bytes, at);
  }

  finish(): Uint8Array<ArrayBuffer> {
    return this.bytes.slice(0, this.length);
  }
}

// ---------------------------------------------------------------------------
// Codec combinators (the same set as Grove.Protocol.Codec)

/** How one value travels: its binary form, its JSON form and a description. */
interface Codec<T> {
  readonly describe: string;
  write(writer: Writer, value: T): void;
  read(reader: Reader): T;
  toJson(value: T): unknown;
  /** Checks type and range; throws a plain Error with the reason. */
  fromJson(json: unknown): T;
}

// Codecs are invariant in T, so a constraint meaning "any codec" needs `any`.
type AnyCodec = Codec<any>;
type ValueOf<C> = C extends Codec<infer T> ? T : never;

function unsigned(bits: 8 | 16 | 32): Codec<number> {
  const max = 2 ** bits - 1;
  const describe = `an integer in 0..${max}`;
  const check = (n: unknown): number => {
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > max) {
      throw new Error(`expected ${describe}`);
    }
    return n;
  };
  return {
    describe,
    write: (w, n) => (bits === 8 ? w.u8(check(n)) : bits === 16 ? w.u16(check(n)) : w.u32(check(n))),
    read: (r) => (bits === 8 ? r.u8() : bits === 16 ? r.u16() : r.u32()),
    toJson: (n) => n,
    fromJson: check,
  };
}

const u8 = unsigned(8);
const u16 = unsigned(16);
const u32 = unsigned(32);

/** The largest integer `uvar` carries: 2^53 - 1, Number.MAX_SAFE_INTEGER. */
const MAX_UVAR = Number.MAX_SAFE_INTEGER;

/**
 * A coordinate, an area's number or an entity's id: an unsigned integer
 * below 2^53 in as few bytes as it needs (0 to 127 one byte, up to 16,383
 * two, up to 2,097,151 three).
 */
const uvar: Codec<number> = {
  describe: `an integer in 0..${MAX_UVAR}`,
  write: (w, n) => {
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > MAX_UVAR) {
      throw new Error(`expected an integer in 0..${MAX_UVAR}`);
    }
    w.uvar(n);
  },
  read: (r) => r.uvar(),
  toJson: (n) => n,
  fromJson: (json) => {
    if (typeof json !== "number" || !Number.isInteger(json) || json < 0 || json > MAX_UVAR) {
      throw new Error(`expected an integer in 0..${MAX_UVAR}`);
    }
    return json;
  },
};

const bool: Codec<boolean> = {
  describe: "a boolean",
  write: (w, b) => w.u8(b ? 1 : 0),
  read: (r) => {
    const byte = r.u8();
    if (byte > 1) throw new ProtocolError("bad_frame", "a boolean must be 0 or 1");
    return byte === 1;
  },
  toJson: (b) => b,
  fromJson: (json) => {
    if (typeof json !== "boolean") throw new Error("expected a boolean");
    return json;
  },
};

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

const string: Codec<string> = {
  describe: "a string",
  write: (w, s) => {
    const bytes = utf8Encoder.encode(s);
    if (bytes.byteLength > 0xffff) throw new Error("a string is longer than 65535 bytes");
    w.u16(bytes.byteLength);
    w.raw(bytes);
  },
  read: (r) => {
    const bytes = r.slice(r.u16(), "a string");
    try {
      return utf8Decoder.decode(bytes);
    } catch {
      throw new ProtocolError("bad_frame", "a string is not valid UTF-8");
    }
  },
  toJson: (s) => s,
  fromJson: (json) => {
    if (typeof json !== "string") throw new Error("expected a string");
    return json;
  },
};

const bytes: Codec<Uint8Array> = {
  describe: "bytes (base64 in JSON)",
  write: (w, b) => {
    w.u32(b.byteLength);
    w.raw(b);
  },
  read: (r) => r.slice(r.u32(), "bytes"),
  toJson: (b) => toBase64(b),
  fromJson: (json) => {
    if (typeof json !== "string") throw new Error("expected bytes (base64 in JSON)");
    return fromBase64(json);
  },
};

/** A game's small data: names to 32-bit integers, strings or booleans. */
export type Data = Record<string, number | string | boolean>;

const MAX_DATA = 16;
const MAX_NAME = 32;

const data: Codec<Data> = {
  describe: `an object of at most ${MAX_DATA} names to 32-bit integers, strings or booleans`,
  write: (w, value) => {
    const entries = Object.entries(value);
    if (entries.length > MAX_DATA) throw new Error(`more than ${MAX_DATA} entries`);
    w.u8(entries.length);
    for (const [name, item] of entries) {
      if (utf8Encoder.encode(name).byteLength > MAX_NAME) throw new Error(`a name is longer than ${MAX_NAME} bytes`);
      string.write(w, name);
      if (typeof item === "number") {
        if (!Number.isInteger(item) || item < -0x80000000 || item > 0x7fffffff) {
          throw new Error(`${name}: expected a 32-bit integer`);
        }
        w.u8(0);
        w.u32(item >>> 0);
      } else if (typeof item === "string") {
        w.u8(1);
        string.write(w, item);
      } else {
        w.u8(2);
        w.u8(item ? 1 : 0);
      }
    }
  },
  read: (r) => {
    const count = r.u8();
    if (count > MAX_DATA) throw new ProtocolError("bad_frame", `${count} entries, at most ${MAX_DATA}`);
    const value: Data = {};
    for (let i = 0; i < count; i++) {
      const name = string.read(r);
      const type = r.u8();
      if (type === 0) value[name] = r.u32() | 0;
      else if (type === 1) value[name] = string.read(r);
      else if (type === 2) value[name] = bool.read(r);
      else throw new ProtocolError("bad_frame", `${type} is not a value's type (0, 1 or 2)`);
    }
    return value;
  },
  toJson: (value) => value,
  fromJson: (json) => {
    if (typeof json !== "object" || json === null || Array.isArray(json)) {
      throw new Error("expected an object");
    }
    const entries = Object.entries(json as Record<string, unknown>);
    if (entries.length > MAX_DATA) throw new Error(`more than ${MAX_DATA} entries`);
    const value: Data = {};
    for (const [name, item] of entries) {
      const ok =
        (typeof item === "number" && Number.isInteger(item) && item >= -0x80000000 && item <= 0x7fffffff) ||
        typeof item === "string" ||
        typeof item === "boolean";
      if (!ok) throw new Error(`${name}: expected a 32-bit integer, a string or a boolean`);
      value[name] = item as number | string | boolean;
    }
    return value;
  },
};

/**
 * A server's enumeration: in binary as `enumeration`, in JSON its code too
 * (its place in the list), a number; a name is read as well, as an error
 * sent before a `join` (an object, version 4's) names it.
 */
function coded<const V extends readonly string[]>(values: V): Codec<V[number]> {
  const named = enumeration(values);
  return {
    ...named,
    describe: `the code of one of ${values.join(", ")}, counted from 0`,
    toJson: (value) => {
      const index = values.indexOf(value);
      if (index < 0) throw new Error(`${JSON.stringify(value)} is not ${named.describe}`);
      return index;
    },
    fromJson: (json) => {
      if (typeof json === "string") return named.fromJson(json);
      if (!Number.isInteger(json) || (json as number) < 0 || (json as number) >= values.length) {
        throw new Error(`${JSON.stringify(json)} is not the code of one of ${values.join(", ")}`);
      }
      return values[json as number] as V[number];
    },
  };
}

function enumeration<const V extends readonly string[]>(values: V): Codec<V[number]> {
  const describe = `one of ${values.join(", ")}`;
  const indexOf = (value: unknown): number => {
    const index = values.indexOf(value as string);
    if (index < 0) throw new Error(`${JSON.stringify(value)} is not ${describe}`);
    return index;
  };
  return {
    describe,
    write: (w, value) => w.u8(indexOf(value)),
    read: (r) => {
      const index = r.u8();
      if (index >= values.length) {
        throw new ProtocolError("bad_frame", `${index} is not one of ${values.length} known values`);
      }
      return values[index] as V[number];
    },
    toJson: (value) => value,
    fromJson: (json) => values[indexOf(json)] as V[number],
  };
}

function list<T>(item: Codec<T>): Codec<T[]> {
  const describe = `a list of ${item.describe}`;
  return {
    describe,
    write: (w, items) => {
      if (items.length > 0xffff) throw new Error("a list has more than 65535 items");
      w.u16(items.length);
      for (const value of items) item.write(w, value);
    },
    read: (r) => {
      const count = r.u16();
      const items: T[] = new Array(count);
      for (let i = 0; i < count; i++) items[i] = item.read(r);
      return items;
    },
    toJson: (items) => items.map((value) => item.toJson(value)),
    fromJson: (json) => {
      if (!Array.isArray(json) || json.length > 0xffff) throw new Error(`expected ${describe}`);
      return json.map((value) => item.fromJson(value));
    },
  };
}

type TupleOf<C extends readonly AnyCodec[]> = { -readonly [K in keyof C]: ValueOf<C[K]> };

function tuple<const C extends readonly AnyCodec[]>(codecs: C): Codec<TupleOf<C>> {
  const describe = `[${codecs.map((c) => c.describe).join(", ")}]`;
  return {
    describe,
    write: (w, values) => codecs.forEach((codec, i) => codec.write(w, values[i])),
    read: (r) => codecs.map((codec) => codec.read(r)) as TupleOf<C>,
    toJson: (values) => codecs.map((codec, i) => codec.toJson(values[i])),
    fromJson: (json) => {
      if (!Array.isArray(json) || json.length !== codecs.length) throw new Error(`expected ${describe}`);
      return codecs.map((codec, i) => codec.fromJson(json[i])) as TupleOf<C>;
    },
  };
}

/** Like `list`, counted by a `uvar` (one byte for up to 127 items). */
function vlist<T>(item: Codec<T>): Codec<T[]> {
  const describe = `a list of ${item.describe}`;
  return {
    describe,
    write: (w, items) => {
      w.uvar(items.length);
      for (const value of items) item.write(w, value);
    },
    read: (r) => {
      const count = r.uvar();
      // Each item takes a byte at least: a count over what is left is a lie.
      if (count > r.remaining) throw new ProtocolError("bad_frame", `truncated: expected ${count} items`);
      const items: T[] = new Array(count);
      for (let i = 0; i < count; i++) items[i] = item.read(r);
      return items;
    },
    toJson: (items) => items.map((value) => item.toJson(value)),
    fromJson: (json) => {
      if (!Array.isArray(json)) throw new Error(`expected ${describe}`);
      return json.map((value) => item.fromJson(value));
    },
  };
}

/**
 * An entity in an `areas` part: its id, its cell counted row by row from the
 * area's corner, and its kind; in a delta, an entity that was in the area
 * already comes without its kind (`undefined`: the area showed it).
 */
export type PartEntity = [id: number, at: number, kind: number | undefined];

/** One area's part of an `areas` message. */
export type AreaPart = [area: number, full: boolean, entities: PartEntity[], gone: number[]];

const snapshotEntities = vlist(tuple([uvar, uvar, u8]));
const goneIds = vlist(uvar);

const PARTS = "the areas' parts, each an area, its entities [id, at, ...] (-id, at, kind with a kind), perhaps its gone ids or true";

/**
 * The parts of an `areas` message: in binary a counted list, each part the
 * area, `full`, the entities and the gone ids, each list counted; a
 * snapshot's entity is its id, cell and kind, a delta's its id, then twice
 * its cell, plus one and its kind when it has one. In JSON one array of the
 * parts one after another, each the area, its entities as one flat array
 * (a snapshot's `id, at, kind`, a delta's `id, at` or `-id, at, kind`),
 * then a delta's gone ids unless it has none, or `true` for a snapshot;
 * the `areas` message spreads them in its own array, after its tag.
 */
const areaParts: Codec<AreaPart[]> = {
  describe: PARTS,
  write: (w, parts) => {
    w.uvar(parts.length);
    for (const [area, full, entities, gone] of parts) {
      uvar.write(w, area);
      bool.write(w, full);
      if (full) {
        if (gone.length > 0) throw new Error("a snapshot has no gone ids");
        snapshotEntities.write(w, entities.map(([id, at, kind]) => [id, at, known(kind)]));
      } else {
        w.uvar(entities.length);
        for (const [id, at, kind] of entities) {
          uvar.write(w, id);
          uvar.write(w, kind === undefined ? 2 * at : 2 * at + 1);
          if (kind !== undefined) u8.write(w, kind);
        }
      }
      goneIds.write(w, gone);
    }
  },
  read: (r) => {
    const count = r.uvar();
    if (count > r.remaining) throw new ProtocolError("bad_frame", `truncated: expected ${count} items`);
    const parts: AreaPart[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const area = uvar.read(r);
      const full = bool.read(r);
      let entities: PartEntity[];
      if (full) {
        entities = snapshotEntities.read(r);
      } else {
        const n = r.uvar();
        if (n > r.remaining) throw new ProtocolError("bad_frame", `truncated: expected ${n} items`);
        entities = new Array(n);
        for (let k = 0; k < n; k++) {
          const id = uvar.read(r);
          const at2 = uvar.read(r);
          entities[k] = [id, Math.floor(at2 / 2), at2 % 2 === 1 ? u8.read(r) : undefined];
        }
      }
      const gone = goneIds.read(r);
      if (full && gone.length > 0) throw new Error("a snapshot with gone ids");
      parts[i] = [area, full, entities, gone];
    }
    return parts;
  },
  toJson: (parts) =>
    parts.flatMap(([area, full, entities, gone]) => {
      if (full) {
        if (gone.length > 0) throw new Error("a snapshot has no gone ids");
        return [area, entities.flatMap(([id, at, kind]) => [id, at, known(kind)]), true];
      }
      const flat = entities.flatMap(([id, at, kind]) => {
        if (kind === undefined) return [id, at];
        if (id < 1) throw new Error("an entity's id is at least 1");
        return [-id, at, kind];
      });
      return gone.length > 0 ? [area, flat, gone] : [area, flat];
    }),
  fromJson: (json) => {
    if (!Array.isArray(json)) throw new Error(`expected ${PARTS}`);
    const parts: AreaPart[] = [];
    let i = 0;
    while (i < json.length) {
      const area = json[i];
      const flat = json[i + 1];
      if (!Array.isArray(flat)) throw new Error(`expected ${PARTS}`);
      i += 2;
      let gone: unknown = [];
      let full = false;
      if (json[i] === true) {
        full = true;
        i++;
      } else if (Array.isArray(json[i])) {
        gone = json[i++];
      }
      const entities: PartEntity[] = [];
      if (full) {
        if (flat.length % 3 !== 0) throw new Error(`expected ${PARTS}`);
        for (let k = 0; k < flat.length; k += 3) {
          entities.push([uvar.fromJson(flat[k]), uvar.fromJson(flat[k + 1]), u8.fromJson(flat[k + 2])]);
        }
      } else {
        let k = 0;
        while (k < flat.length) {
          const id = flat[k];
          if (typeof id === "number" && id < 0) {
            if (k + 3 > flat.length) throw new Error(`expected ${PARTS}`);
            entities.push([uvar.fromJson(-id), uvar.fromJson(flat[k + 1]), u8.fromJson(flat[k + 2])]);
            k += 3;
          } else {
            if (k + 2 > flat.length) throw new Error(`expected ${PARTS}`);
            entities.push([uvar.fromJson(id), uvar.fromJson(flat[k + 1]), undefined]);
            k += 2;
          }
        }
      }
      parts.push([uvar.fromJson(area), full, entities, goneIds.fromJson(gone)]);
    }
    return parts;
  },
};

// A snapshot's entity has its kind.
function known(kind: number | undefined): number {
  if (kind === undefined) throw new Error("a snapshot's entity has its kind");
  return kind;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const GROUND = "ground cells, two a character of base64's alphabet";

/**
 * An area's ground cells (codes 0 to 7): in binary as `bytes`; in JSON two
 * cells a character, the character of base64's alphabet at 8 x the first +
 * the second, and `=` after the last character when the count is odd.
 */
const groundCells: Codec<Uint8Array> = {
  describe: GROUND,
  write: (w, b) => bytes.write(w, b),
  read: (r) => bytes.read(r),
  toJson: (cells) => {
    let text = "";
    for (let i = 0; i < cells.length; i += 2) {
      const a = cells[i] as number;
      const b = i + 1 < cells.length ? (cells[i + 1] as number) : 0;
      if (a > 7 || b > 7) throw new Error("a ground cell's code is over 7");
      text += ALPHABET[a * 8 + b];
    }
    return cells.length % 2 === 1 ? text + "=" : text;
  },
  fromJson: (json) => {
    if (typeof json !== "string") throw new Error(`expected ${GROUND}`);
    const odd = json.endsWith("=");
    const chars = odd ? json.slice(0, -1) : json;
    const cells = new Uint8Array(chars.length * 2 - (odd ? 1 : 0));
    for (let i = 0; i < chars.length; i++) {
      const pair = ALPHABET.indexOf(chars[i] as string);
      if (pair < 0) throw new Error(`expected ${GROUND}`);
      cells[2 * i] = pair >> 3;
      if (2 * i + 1 < cells.length) cells[2 * i + 1] = pair & 7;
      else if ((pair & 7) !== 0) throw new Error(`expected ${GROUND}`);
    }
    return cells;
  },
};

/**
 * A part's entities on their cells, `[id, x, y, kind]`, from the corner and
 * width of the area's ground (which comes before its first snapshot); an
 * entity without its kind (one that stayed in its area) takes the one
 * `kindOf` gives (what the area showed of it), else 0.
 */
export function placeEntities(
  entities: readonly PartEntity[],
  ground: { readonly x: number; readonly y: number; readonly width: number },
  kindOf: (id: number) => number | undefined = () => undefined,
): [id: number, x: number, y: number, kind: number][] {
  return entities.map(([id, at, kind]) => [
    id,
    ground.x + (at % ground.width),
    ground.y + Math.floor(at / ground.width),
    kind ?? kindOf(id) ?? 0,
  ]);
}

// Chunked, because String.fromCharCode(...bytes) overflows the stack on a
// large minimap.
function toBase64(data: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < data.byteLength; i += 0x8000) {
    binary += String.fromCharCode(...data.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    throw new Error("not base64");
  }
  const data = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) data[i] = binary.charCodeAt(i);
  return data;
}

// ---------------------------------------------------------------------------
// Enumerations

export const directions = ["n", "ne", "e", "se", "s", "sw", "w", "nw"] as const;
export const results = [
  "ok",
  "out_of_bounds",
  "blocked",
  "occupied",
  "rate_limited",
  "busy",
  "not_owner",
  "unknown_entity",
  "interrupted",
] as const;
export const errorCodes = [
  "bad_json",
  "bad_message",
  "unknown_type",
  "bad_field",
  "bad_frame",
  "too_large",
  "rate_limited",
  "not_joined",
  "already_joined",
  "join_failed",
  "unauthorized",
  "server_busy",
  "unsupported_protocol",
  "invalid_name",
] as const;
/** Patterns of bacteria a player may seed. */
export const patterns = ["glider", "blinker", "block", "r_pentomino", "lwss", "beacon", "toad"] as const;
export const seedResults = [
  "ok",
  "out_of_bounds",
  "zone_edge",
  "blocked",
  "occupied",
  "rate_limited",
  "busy",
  "disabled",
  "not_owner",
  "unknown_entity",
  "interrupted",
] as const;
/** Where an action aims: the player's own cell, or the next one in a direction. */
export const targets = ["here", ...directions] as const;
export const actResults = [
  "ok",
  "refused",
  "unknown_action",
  "bad_args",
  "out_of_reach",
  "out_of_bounds",
  "rate_limited",
  "busy",
  "not_owner",
  "unknown_entity",
  "interrupted",
  "disabled",
] as const;
/** A said line's result: what is wrong with the line, or why the world did not carry it. */
export const sayResults = [
  "ok",
  "empty",
  "too_long",
  "bad_utf8",
  "bad_character",
  "rate_limited",
  "busy",
  "not_owner",
  "unknown_entity",
  "interrupted",
] as const;
export const byeReasons = [
  "shutdown",
  "slow_consumer",
  "too_many_errors",
  "replaced",
  "too_large",
  "unsupported_protocol",
  "rejoin",
] as const;

export type Direction = (typeof directions)[number];
export type MoveResult = (typeof results)[number];
export type Pattern = (typeof patterns)[number];
export type SeedResult = (typeof seedResults)[number];
export type Target = (typeof targets)[number];
export type ActResult = (typeof actResults)[number];
export type SayResult = (typeof sayResults)[number];

/** Cell codes of `GET /terrain`; trees, rocks and water block movement. */
export const terrainKinds = ["meadow", "tree", "rock", "water", "flowers"] as const;
export type TerrainKind = (typeof terrainKinds)[number];

/** Entity kinds in a view's entity tuples. */
export const ACTOR = 0;
export const PLAYER = 1;
/** A live cell of the world's Game of Life: born and dying, never moving. */
export const BACTERIUM = 2;

// ---------------------------------------------------------------------------
// Messages

interface Field<T> {
  readonly codec: Codec<T>;
  /** Present when JSON may leave the field out. */
  readonly default?: { readonly value: T };
  /** A message's last field, whose JSON array is spread in the message's own. */
  readonly spread?: true;
}

const required = <T>(codec: Codec<T>): Field<T> => ({ codec });
const spread = <T>(codec: Codec<T>): Field<T> => ({ codec, spread: true });
const optional = <T>(codec: Codec<T>, value: T): Field<T> & { default: { value: T } } => ({
  codec,
  default: { value },
});

interface Definition {
  readonly tag: number;
  readonly from: "client" | "server";
  /** In binary order: object keys keep their insertion order. */
  readonly fields: Readonly<Record<string, Field<any>>>;
}

const direction = enumeration(directions);
const entityTuple = tuple([uvar, uvar, uvar, u8]);
const cellTuple = tuple([uvar, uvar, u8]);
const lookTuple = tuple([uvar, u8]);
const eventTuple = tuple([uvar, uvar, uvar, string, data]);

/** Every message of the protocol: the same table as `@messages` on the server. */
export const definitions = {
  // Client to server
  join: {
    tag: 5,
    from: "client",
    fields: {
      protocol: required(u8),
      view_radius: optional(u8, 8),
      name: optional(string, ""),
      token: optional(string, ""),
      minimap: optional(bool, true),
    },
  },
  move: { tag: 2, from: "client", fields: { seq: required(u32), dir: required(direction) } },
  ping: { tag: 3, from: "client", fields: { t: required(u32) } },
  resync: { tag: 4, from: "client", fields: {} },
  seed: {
    tag: 6,
    from: "client",
    fields: { seq: required(u32), pattern: required(enumeration(patterns)), dir: required(direction) },
  },
  act: {
    tag: 7,
    from: "client",
    fields: {
      seq: required(u32),
      action: required(string),
      dir: optional(enumeration(targets), "here"),
      args: optional(data, {}),
    },
  },
  say: { tag: 8, from: "client", fields: { seq: required(u32), text: required(string) } },
  // Server to client
  welcome: {
    tag: 64,
    from: "server",
    fields: {
      protocol: required(u8),
      id: required(uvar),
      x: required(uvar),
      y: required(uvar),
      width: required(uvar),
      height: required(uvar),
      view_radius: required(u8),
      tick_ms: required(u16),
      view_ms: required(u16),
      name: required(string),
      avatar: required(string),
    },
  },
  outcome: {
    tag: 65,
    from: "server",
    fields: { seq: required(u32), result: required(coded(results)), x: required(uvar), y: required(uvar) },
  },
  error: {
    tag: 67,
    from: "server",
    fields: { code: required(coded(errorCodes)), message: required(string) },
  },
  pong: { tag: 68, from: "server", fields: { t: required(u32) } },
  stats: {
    tag: 69,
    from: "server",
    fields: { players: required(u32), actors: required(u32), entities: required(u32), moves_per_s: required(u32) },
  },
  density: {
    tag: 70,
    from: "server",
    fields: { cols: required(u16), rows: required(u16), cells: required(bytes) },
  },
  bye: {
    tag: 71,
    from: "server",
    fields: { reason: required(coded(byeReasons)), message: required(string) },
  },
  area: {
    tag: 72,
    from: "server",
    fields: {
      area: required(uvar),
      full: required(bool),
      entities: required(list(entityTuple)),
      gone: required(list(uvar)),
      cells: optional(list(cellTuple), []),
      looks: optional(list(lookTuple), []),
      events: optional(list(eventTuple), []),
    },
  },
  area_closed: { tag: 73, from: "server", fields: { area: required(uvar) } },
  colonies: {
    tag: 74,
    from: "server",
    fields: { cols: required(u16), rows: required(u16), cells: required(bytes) },
  },
  seeded: {
    tag: 75,
    from: "server",
    fields: { seq: required(u32), result: required(coded(seedResults)) },
  },
  acted: {
    tag: 76,
    from: "server",
    fields: {
      seq: required(u32),
      result: required(coded(actResults)),
      data: required(data),
      reason: required(string),
    },
  },
  names: {
    tag: 77,
    from: "server",
    fields: { area: required(uvar), names: required(list(tuple([uvar, string, string]))) },
  },
  said: {
    tag: 78,
    from: "server",
    fields: { seq: required(u32), result: required(coded(sayResults)), reason: required(string) },
  },
  announcement: { tag: 79, from: "server", fields: { text: required(string) } },
  ground: {
    tag: 80,
    from: "server",
    fields: {
      area: required(uvar),
      x: required(uvar),
      y: required(uvar),
      width: required(u16),
      height: required(u16),
      cells: required(groundCells),
    },
  },
  places: {
    tag: 81,
    from: "server",
    fields: { zone_size: required(u16), places: required(list(tuple([u16, u16, u16]))) },
  },
  // Several areas' snapshots or deltas at once, each [area, full, entities, gone],
  // each entity [id, at, kind] with its cell counted from the area's corner,
  // a delta's without its kind when it was in the area already; in JSON the
  // parts follow the tag in the message's array.
  areas: {
    tag: 82,
    from: "server",
    fields: { areas: spread(areaParts) },
  },
} as const satisfies Record<string, Definition>;

type Definitions = typeof definitions;
export type MessageType = keyof Definitions;
type FieldsOf<N extends MessageType> = Definitions[N]["fields"];
type FieldValue<F> = F extends Field<infer T> ? T : never;

/** A message as decoded: every field present. */
export type Message<N extends MessageType = MessageType> = N extends MessageType
  ? { type: N } & { -readonly [K in keyof FieldsOf<N>]: FieldValue<FieldsOf<N>[K]> }
  : never;

type DefaultedKeys<F> = { [K in keyof F]: F[K] extends { default: unknown } ? K : never }[keyof F];

/** A message as given to `encode`: fields with a default may be left out. */
export type Outgoing<N extends MessageType = MessageType> = N extends MessageType
  ? { type: N } & Omit<Message<N>, "type" | DefaultedKeys<FieldsOf<N>>> &
      Partial<Pick<Message<N>, DefaultedKeys<FieldsOf<N>> & keyof Message<N>>>
  : never;

export type Welcome = Message<"welcome">;
export type Outcome = Message<"outcome">;
export type Area = Message<"area">;
export type AreaClosed = Message<"area_closed">;
export type Stats = Message<"stats">;
export type Density = Message<"density">;
export type Colonies = Message<"colonies">;
export type Seeded = Message<"seeded">;
export type Acted = Message<"acted">;
export type Names = Message<"names">;
export type Said = Message<"said">;
export type Announcement = Message<"announcement">;
export type Ground = Message<"ground">;
export type Places = Message<"places">;
export type Areas = Message<"areas">;

const byTag = new Map<number, MessageType>();
for (const name of Object.keys(definitions) as MessageType[]) byTag.set(definitions[name].tag, name);

function fieldsOf(type: MessageType): [string, Field<unknown>][] {
  return Object.entries(definitions[type].fields as Record<string, Field<unknown>>);
}

function valueFor(message: Record<string, unknown>, name: string, field: Field<unknown>): unknown {
  if (name in message && message[name] !== undefined) return message[name];
  if (field.default) return field.default.value;
  throw new Error(`message ${String(message.type)} lacks ${name}`);
}

// In binary, the optional fields at the end of a message that all take
// their defaults are left out; a message that ends before them reads them as
// their defaults (docs/protocol.md).
function withoutDefaultsAtEnd(
  fields: [string, Field<unknown>][],
  message: Record<string, unknown>,
): [string, Field<unknown>][] {
  let end = fields.length;
  while (end > 0) {
    const [name, field] = fields[end - 1] as [string, Field<unknown>];
    if (!field.default || !isDefault(field, valueFor(message, name, field))) break;
    end--;
  }
  return fields.slice(0, end);
}

function isDefault(field: Field<unknown>, value: unknown): boolean {
  const byDefault = field.default?.value;
  if (value === byDefault) return true;
  return JSON.stringify(field.codec.toJson(value)) === JSON.stringify(field.codec.toJson(byDefault));
}

/**
 * Encodes a message for a connection's encoding: a string for a text frame
 * or bytes for a binary frame. Throws on a message that does not fit its
 * definition, which is a bug in the caller.
 */
export function encode(message: Outgoing, encoding: "json"): string;
export function encode(message: Outgoing, encoding: "binary"): Uint8Array<ArrayBuffer>;
export function encode(message: Outgoing, encoding: Encoding): string | Uint8Array<ArrayBuffer>;
export function encode(message: Outgoing, encoding: Encoding): string | Uint8Array<ArrayBuffer> {
  const definition: Definition | undefined = definitions[message.type];
  if (!definition) throw new Error(`unknown message type ${JSON.stringify(message.type)}`);
  const values = message as Record<string, unknown>;

  if (encoding === "binary") {
    const writer = new Writer();
    writer.u8(definition.tag);
    for (const [name, field] of withoutDefaultsAtEnd(fieldsOf(message.type), values)) {
      field.codec.write(writer, valueFor(values, name, field));
    }
    return writer.finish();
  }

  // The server's messages are arrays: the tag, then the fields (a field
  // spread, its items).
  if (definition.from === "server") {
    const fields = withoutDefaultsAtEnd(fieldsOf(message.type), values);
    return JSON.stringify([
      definition.tag,
      ...fields.flatMap(([name, field]) => {
        const json = field.codec.toJson(valueFor(values, name, field));
        return field.spread ? (json as unknown[]) : [json];
      }),
    ]);
  }

  const json: Record<string, unknown> = { type: message.type };
  for (const [name, field] of fieldsOf(message.type)) {
    json[name] = field.codec.toJson(valueFor(values, name, field));
  }
  return JSON.stringify(json);
}

/**
 * Decodes one frame: a string is a JSON text frame, bytes a binary frame.
 * Throws a ProtocolError whose code is the one the server would answer with.
 */
export function decode(frame: string | ArrayBuffer | Uint8Array): Message {
  return typeof frame === "string"
    ? decodeJson(frame)
    : decodeBinary(frame instanceof Uint8Array ? frame : new Uint8Array(frame));
}

function decodeBinary(frame: Uint8Array): Message {
  const reader = new Reader(frame);
  if (reader.remaining === 0) throw new ProtocolError("bad_frame", "empty frame");
  const tag = reader.u8();
  const type = byTag.get(tag);
  if (!type) throw new ProtocolError("bad_frame", `unknown message tag ${tag}`);

  const message: Record<string, unknown> = { type };
  const fields = fieldsOf(type);
  for (const [index, [name, field]] of fields.entries()) {
    if (reader.remaining === 0 && fields.slice(index).every(([, rest]) => rest.default)) {
      message[name] = field.default?.value;
      continue;
    }
    try {
      message[name] = field.codec.read(reader);
    } catch (error) {
      throw new ProtocolError("bad_frame", `${name}: ${(error as Error).message}`);
    }
  }
  if (reader.remaining > 0) {
    throw new ProtocolError("bad_frame", `${reader.remaining} unexpected bytes after the message`);
  }
  return message as Message;
}

function decodeJson(frame: string): Message {
  let object: unknown;
  try {
    object = JSON.parse(frame);
  } catch {
    throw new ProtocolError("bad_json", "the frame is not valid JSON");
  }
  if (Array.isArray(object) && typeof object[0] === "number") return decodeArray(object);
  if (typeof object !== "object" || object === null || Array.isArray(object)) {
    throw new ProtocolError("bad_message", 'a message is a JSON object with a "type" string');
  }
  const json = object as Record<string, unknown>;
  if (typeof json.type !== "string") {
    throw new ProtocolError("bad_message", 'a message is a JSON object with a "type" string');
  }
  if (!Object.prototype.hasOwnProperty.call(definitions, json.type)) {
    throw new ProtocolError("unknown_type", `unknown message type ${JSON.stringify(json.type)}`);
  }
  const type = json.type as MessageType;

  const message: Record<string, unknown> = { type };
  for (const [name, field] of fieldsOf(type)) {
    if (!(name in json)) {
      if (!field.default) throw new ProtocolError("bad_field", `${name}: missing`);
      message[name] = field.default.value;
      continue;
    }
    try {
      message[name] = field.codec.fromJson(json[name]);
    } catch (error) {
      throw new ProtocolError("bad_field", `${name}: ${(error as Error).message}`);
    }
  }
  return message as Message;
}

// A server's message in JSON: its tag, then its fields in order, those at
// the end that take their defaults perhaps left out.
function decodeArray([tag, ...values]: unknown[]): Message {
  const type = byTag.get(tag as number);
  if (!type || definitions[type].from !== "server") throw new ProtocolError("unknown_type", `unknown message tag ${String(tag)}`);
  const fields = fieldsOf(type);
  const spreadAt = fields.findIndex(([, field]) => field.spread);
  if (spreadAt >= 0) {
    // The last field takes every value left.
    values = [...values.slice(0, spreadAt), values.slice(spreadAt)];
  }
  if (values.length > fields.length) {
    throw new ProtocolError("bad_field", `${values.length - fields.length} values after the message's fields`);
  }
  const message: Record<string, unknown> = { type };
  for (const [index, [name, field]] of fields.entries()) {
    if (index >= values.length) {
      if (!field.default) throw new ProtocolError("bad_field", `${name}: missing`);
      message[name] = field.default.value;
      continue;
    }
    try {
      message[name] = field.codec.fromJson(values[index]);
    } catch (error) {
      throw new ProtocolError("bad_field", `${name}: ${(error as Error).message}`);
    }
  }
  return message as Message;
}
