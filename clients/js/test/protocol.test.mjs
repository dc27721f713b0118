// src/protocol.ts against docs/protocol.md: every message round-trips in both
// encodings, the documented bytes and JSON decode as documented, bad frames
// fail with the server's error codes, and the message table matches the doc.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import * as protocol from "../dist/index.js";

const { encode, decode, definitions, ProtocolError } = protocol;

const bytes = (...values) => Uint8Array.from(values);

const fails = (frame, code, message) =>
  assert.throws(
    () => decode(frame),
    (error) => error instanceof ProtocolError && error.code === code && (!message || error.message === message),
  );

// One example of every message, with every field given.
const examples = {
  join: { type: "join", protocol: 3, view_radius: 12, name: "Ada 🌳", token: "secret", minimap: false },
  move: { type: "move", seq: 4_000_000_000, dir: "nw" },
  ping: { type: "ping", t: 0xffffffff },
  resync: { type: "resync" },
  seed: { type: "seed", seq: 77, pattern: "r_pentomino", dir: "sw" },
  act: { type: "act", seq: 12, action: "pick", dir: "ne", args: { count: -3, name: "🍎", hard: true } },
  say: { type: "say", seq: 13, text: "hello, Zoë 👋" },
  welcome: {
    type: "welcome",
    protocol: 3,
    id: 20001,
    x: 412_345,
    y: 96,
    width: 1_000_000,
    height: 1_000_000,
    view_radius: 8,
    tick_ms: 100,
    view_ms: 1000,
    name: "",
    avatar: "🙂",
  },
  outcome: { type: "outcome", seq: 9, result: "unknown_entity", x: 999_999, y: 0 },
  area: {
    type: "area",
    area: 399_999_999,
    full: false,
    entities: [
      [20001, 413, 96, 1],
      [377, 408, 99, 0],
      [Number.MAX_SAFE_INTEGER - 2_000_001, 1, 2, 2],
    ],
    gone: [5, 4294967295],
    cells: [[413, 97, 1]],
    looks: [[20001, 3]],
    events: [[20001, 413, 97, "picked", { left: 2 }]],
  },
  area_closed: { type: "area_closed", area: 157 },
  error: { type: "error", code: "server_busy", message: "très occupé" },
  pong: { type: "pong", t: 123456 },
  stats: { type: "stats", players: 3, actors: 20000, entities: 20003, moves_per_s: 19999 },
  density: { type: "density", cols: 3, rows: 2, cells: bytes(0, 1, 127, 128, 254, 255) },
  bye: { type: "bye", reason: "too_large", message: "" },
  colonies: { type: "colonies", cols: 2, rows: 1, cells: bytes(0, 255) },
  seeded: { type: "seeded", seq: 77, result: "zone_edge" },
  acted: { type: "acted", seq: 12, result: "refused", data: {}, reason: "no_apples" },
  said: { type: "said", seq: 13, result: "too_long", reason: "a line is at most 200 characters" },
  announcement: { type: "announcement", text: "The orchard closes at noon" },
  places: {
    type: "places",
    zone_size: 50,
    places: [
      [19999, 4, 120],
      [0, 19999, 65535],
    ],
  },
  names: {
    type: "names",
    area: 168,
    names: [
      [20001, "Ada Lovelace", "🦊"],
      [20002, "Zoë", "👨‍👩‍👧"],
    ],
  },
  ground: { type: "ground", area: 168, x: 400, y: 50, width: 2, height: 2, cells: bytes(0, 1, 3, 4) },
  areas: {
    type: "areas",
    areas: [
      [941, false, [[20001, 63, 1], [377, 98, undefined]], [5, 4294967295]],
      [399_999_999, true, [], []],
      [942, true, [[20003, 12, 3]], []],
    ],
  },
};

describe("every message", () => {
  test("has an example here", () => {
    assert.deepEqual(Object.keys(examples).sort(), Object.keys(definitions).sort());
  });

  for (const [type, message] of Object.entries(examples)) {
    test(`${type} round-trips in JSON`, () => {
      const frame = encode(message, "json");
      assert.equal(typeof frame, "string");
      assert.deepEqual(decode(frame), message);
    });

    test(`${type} round-trips in binary`, () => {
      const frame = encode(message, "binary");
      assert.ok(frame instanceof Uint8Array);
      assert.equal(frame[0], definitions[type].tag);
      assert.deepEqual(decode(frame), message);
      // A binary WebSocket frame arrives as an ArrayBuffer in the browser.
      assert.deepEqual(decode(frame.slice().buffer), message);
    });
  }
});

describe("the documented forms", () => {
  test("areas in binary: tag, then each count a uvar; a delta's cell doubled, plus one when its kind follows", () => {
    const message = { type: "areas", areas: [[941, false, [[20001, 63, 1], [377, 5, undefined]], [5]], [942, true, [[7, 9, 3]], []]] };
    // 82, two areas: 941 as uvar, not full, two entities (20001, at 63 as
    // 127 with kind 1; 377 at 5 as 10, no kind), one gone (5); then 942, a
    // snapshot, one entity (7, at 9, kind 3), none gone.
    const expected = bytes(82, 2, 0xad, 0x07, 0, 2, 0xa1, 0x9c, 0x01, 127, 1, 0xf9, 0x02, 10, 1, 5, 0xae, 0x07, 1, 1, 7, 9, 3, 0);
    assert.deepEqual(encode(message, "binary"), expected);
    assert.deepEqual(decode(expected), message);
  });

  test("areas in JSON: the parts one after another in the message's array, each the area, its entities flat (a delta's kind only for one that came in, its id negated), then gone or true", () => {
    const text = "[82,941,[-20001,63,1,377,98],942,[],[377],943,[20003,12,3],true]";
    const message = {
      type: "areas",
      areas: [
        [941, false, [[20001, 63, 1], [377, 98, undefined]], []],
        [942, false, [], [377]],
        [943, true, [[20003, 12, 3]], []],
      ],
    };
    assert.equal(encode(message, "json"), text);
    assert.deepEqual(decode(text), message);
    fails("[82,941,[-20001,63]]", "bad_field");
    fails("[82,943,[20003,12],true]", "bad_field");
    fails("[82,941]", "bad_field");
    // Version 6's parts, in a list of their own, are not version 7's.
    fails("[82,[941,[20001,63]]]", "bad_field");
  });

  test("ground cells in JSON: two a character of base64's alphabet, = after an odd count", () => {
    const ground = { type: "ground", area: 5, x: 250, y: 0, width: 5, height: 1, cells: bytes(0, 1, 3, 4, 2) };
    assert.equal(encode(ground, "json"), '[80,5,250,0,5,1,"BcQ="]');
    assert.deepEqual(decode('[80,5,250,0,5,1,"BcQ="]'), ground);
    fails('[80,5,250,0,5,1,"B=c"]', "bad_field");
    fails('[80,5,250,0,5,1,"R="]', "bad_field");
  });

  test("a part's entities are placed from their area's corner and width", () => {
    // At 63 in an area 10 wide: row 6, column 3.
    const ground = { x: 410, y: 90, width: 10 };
    assert.deepEqual(protocol.placeEntities([[20001, 63, 1], [377, 0, 0]], ground), [
      [20001, 413, 96, 1],
      [377, 410, 90, 0],
    ]);
    // A narrower area at the world's east edge.
    assert.deepEqual(protocol.placeEntities([[7, 5, 3]], { x: 990, y: 0, width: 2 }), [[7, 991, 2, 3]]);
    // One that stayed in its area, without its kind: the one the area showed.
    assert.deepEqual(protocol.placeEntities([[7, 5, undefined]], ground, (id) => (id === 7 ? 4 : undefined)), [[7, 415, 90, 4]]);
  });

  test("the server's messages in JSON are arrays: the tag, then the fields, an enumeration as its code; a client's are objects", () => {
    assert.equal(encode({ type: "outcome", seq: 1, result: "ok", x: 413, y: 96 }, "json"), "[65,1,0,413,96]");
    assert.equal(encode({ type: "outcome", seq: 1, result: "blocked", x: 413, y: 96 }, "json"), "[65,1,2,413,96]");
    assert.equal(encode({ type: "bye", reason: "replaced", message: "m" }, "json"), '[71,3,"m"]');
    assert.deepEqual(decode('[71,3,"m"]'), { type: "bye", reason: "replaced", message: "m" });
    // A code past the list is refused; a name is read (an error before a
    // join is an object, as in version 4).
    fails("[65,1,99,413,96]", "bad_field");
    assert.deepEqual(decode('{"type":"error","code":"unsupported_protocol","message":"m"}'), {
      type: "error",
      code: "unsupported_protocol",
      message: "m",
    });
    assert.equal(encode({ type: "area_closed", area: 941 }, "json"), "[73,941]");
    assert.equal(encode({ type: "pong", t: 5 }, "json"), "[68,5]");
    // The optional fields at the end that take their defaults are left out.
    assert.equal(
      encode({ type: "area", area: 1, full: false, entities: [], gone: [], cells: [], looks: [], events: [] }, "json"),
      "[72,1,false,[],[]]",
    );
    assert.equal(encode({ type: "ping", t: 5 }, "json"), '{"type":"ping","t":5}');
    fails("[65,1,0]", "bad_field", "x: missing");
    fails("[73,1,2]", "bad_field", "1 values after the message's fields");
    fails('[2,7,"ne"]', "unknown_type");
  });

  test("move in binary is tag, u32 seq, direction byte", () => {
    assert.deepEqual(encode({ type: "move", seq: 1, dir: "e" }, "binary"), bytes(2, 0, 0, 0, 1, 2));
    assert.deepEqual(decode(bytes(2, 0, 0, 0, 7, 1)), { type: "move", seq: 7, dir: "ne" });
  });

  test("move in JSON is the server's exact text", () => {
    assert.equal(encode({ type: "move", seq: 7, dir: "ne" }, "json"), '{"type":"move","seq":7,"dir":"ne"}');
  });

  test("join fills its optional fields with their defaults", () => {
    assert.deepEqual(decode('{"type":"join","protocol":2}'), {
      type: "join",
      protocol: 2,
      view_radius: 8,
      name: "",
      token: "",
      minimap: true,
    });
    assert.deepEqual(JSON.parse(encode({ type: "join", protocol: 2 }, "json")), {
      type: "join",
      protocol: 2,
      view_radius: 8,
      name: "",
      token: "",
      minimap: true,
    });
    // In binary, optional fields at the end that take their defaults are left out.
    assert.deepEqual(encode({ type: "join", protocol: 2 }, "binary"), bytes(5, 2));
    assert.deepEqual(encode({ type: "join", protocol: 2, name: "A" }, "binary"), bytes(5, 2, 8, 0, 1, 65));
    assert.deepEqual(encode({ type: "join", protocol: 2, minimap: false }, "binary"), bytes(5, 2, 8, 0, 0, 0, 0, 0));
    for (const frame of [bytes(5, 2), bytes(5, 2, 8), bytes(5, 2, 8, 0, 0, 0, 0)]) {
      assert.deepEqual(decode(frame), { type: "join", protocol: 2, view_radius: 8, name: "", token: "", minimap: true });
    }
    assert.throws(() => decode(bytes(2, 0, 0, 0, 7)), { code: "bad_frame" }, "a required field is never left out");
  });

  test("the example session decodes", () => {
    assert.deepEqual(
      decode(
        '{"type":"welcome","protocol":3,"id":20001,"x":412345,"y":96,"width":1000000,"height":1000000,"view_radius":8,"tick_ms":100,"view_ms":1000,"name":"","avatar":"🙂"}',
      ),
      examples.welcome,
    );
    assert.deepEqual(
      decode('{"type":"area","area":157,"full":true,"entities":[[20001,412,96,1],[377,408,99,0]],"gone":[]}'),
      {
        type: "area",
        area: 157,
        full: true,
        entities: [
          [20001, 412, 96, 1],
          [377, 408, 99, 0],
        ],
        gone: [],
        cells: [],
        looks: [],
        events: [],
      },
    );
    assert.deepEqual(decode('{"type":"outcome","seq":1,"result":"ok","x":413,"y":96}'), {
      type: "outcome",
      seq: 1,
      result: "ok",
      x: 413,
      y: 96,
    });
    assert.deepEqual(decode('{"type":"pong","t":123456}'), { type: "pong", t: 123456 });
    assert.deepEqual(decode("[65,1,0,413,96]"), { type: "outcome", seq: 1, result: "ok", x: 413, y: 96 });
    assert.deepEqual(decode("[82,941,[20001,63]]"), { type: "areas", areas: [[941, false, [[20001, 63, undefined]], []]] });
  });

  test("an area in binary: uvar area, bool, counted entity tuples, counted ids, counted game fields up to the last not empty", () => {
    const area = {
      type: "area",
      area: 258,
      full: true,
      entities: [[1, 2, 300, 1]],
      gone: [7],
      cells: [],
      looks: [[1, 2]],
      events: [],
    };
    const expected = bytes(
      72,
      0x82, 0x02,
      1,
      0, 1, 1, 2, 0xac, 0x02, 1,
      0, 1, 7,
      0, 0,
      0, 1, 1, 2,
    );
    // No events: the area ends after its looks.
    assert.deepEqual(encode(area, "binary"), expected);
    assert.deepEqual(decode(expected), area);
    assert.deepEqual(decode(bytes(...expected, 0, 0)), area);
  });

  test("an action's data: a counted list of name, type byte and value", () => {
    const acted = { type: "acted", seq: 1, result: "ok", data: { n: -1, s: "é", b: true }, reason: "" };
    const expected = bytes(
      76,
      0, 0, 0, 1,
      0,
      3,
      0, 1, 0x6e, 0, 0xff, 0xff, 0xff, 0xff,
      0, 1, 0x73, 1, 0, 2, 0xc3, 0xa9,
      0, 1, 0x62, 2, 1,
      0, 0,
    );
    assert.deepEqual(encode(acted, "binary"), expected);
    assert.deepEqual(decode(expected), acted);
    assert.deepEqual(decode('{"type":"act","seq":3,"action":"pick"}'), {
      type: "act",
      seq: 3,
      action: "pick",
      dir: "here",
      args: {},
    });
  });

  test("uvar: the documented outcome, any coordinate a world has, nothing past 2^53 - 1", () => {
    const outcome = { type: "outcome", seq: 1, result: "ok", x: 413, y: 96 };
    const documented = bytes(0x41, 0, 0, 0, 1, 0, 0x9d, 0x03, 0x60);
    assert.deepEqual(encode(outcome, "binary"), documented);
    assert.deepEqual(decode(documented), outcome);
    for (const n of [0, 127, 128, 16_383, 16_384, 999_999, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
      const closed = { type: "area_closed", area: n };
      assert.deepEqual(decode(encode(closed, "binary")), closed);
    }
    assert.throws(() => encode({ type: "area_closed", area: 2 ** 53 }, "binary"));
    fails(bytes(73, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "bad_frame");
    fails(bytes(73, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "bad_frame");
    fails(bytes(73, 0x80), "bad_frame");
  });

  test("bytes are base64 in JSON and length-prefixed in binary", () => {
    const density = { type: "density", cols: 2, rows: 1, cells: bytes(0, 255) };
    assert.equal(JSON.parse(encode(density, "json"))[3], "AP8=");
    assert.deepEqual(encode(density, "binary"), bytes(70, 0, 2, 0, 1, 0, 0, 0, 2, 0, 255));
  });

  test("a large minimap and a crowded area survive both encodings", () => {
    const cells = Uint8Array.from({ length: 200 * 200 }, (_, i) => (i * 31) % 256);
    const density = { type: "density", cols: 200, rows: 200, cells };
    assert.deepEqual(decode(encode(density, "json")), density);
    assert.deepEqual(decode(encode(density, "binary")), density);
    const entities = Array.from({ length: 33 * 33 }, (_, i) => [i * 7919, i % 1000, i % 977, i % 2]);
    const area = {
      type: "area",
      area: 9,
      full: true,
      entities,
      gone: entities.map(([id]) => id),
      cells: entities.map(([, x, y], i) => [x, y, i % 256]),
      looks: [],
      events: [],
    };
    assert.deepEqual(decode(encode(area, "json")), area);
    assert.deepEqual(decode(encode(area, "binary")), area);
  });

  test("strings are UTF-8 with a u16 byte length", () => {
    const bye = { type: "bye", reason: "shutdown", message: "é" };
    assert.deepEqual(encode(bye, "binary"), bytes(71, 0, 0, 2, 0xc3, 0xa9));
  });

  test("enumerations are their position in binary", () => {
    for (const [index, dir] of protocol.directions.entries()) {
      assert.equal(encode({ type: "move", seq: 0, dir }, "binary")[5], index);
    }
    for (const [index, result] of protocol.results.entries()) {
      assert.equal(encode({ ...examples.outcome, result }, "binary")[5], index);
    }
  });
});

describe("frames that cannot be read", () => {
  test("JSON that is not JSON, not an object, or of no known type", () => {
    fails("{nope", "bad_json");
    fails("[1, 2]", "unknown_type");
    fails('["move", 2]', "bad_message");
    fails('{"seq": 1}', "bad_message");
    fails('{"type": 3}', "bad_message");
    fails('{"type": "dance"}', "unknown_type");
    fails('{"type": "toString"}', "unknown_type");
  });

  test("JSON fields missing, mistyped or out of range", () => {
    fails('{"type":"move","seq":-1,"dir":"ne"}', "bad_field", "seq: expected an integer in 0..4294967295");
    fails('{"type":"move","dir":"ne"}', "bad_field", "seq: missing");
    fails('{"type":"move","seq":1.5,"dir":"ne"}', "bad_field");
    fails('{"type":"move","seq":1,"dir":"up"}', "bad_field");
    fails('{"type":"join","protocol":2,"view_radius":256}', "bad_field");
    fails('{"type":"join"}', "bad_field", "protocol: missing");
    fails('{"type":"area","area":0,"full":1,"entities":[],"gone":[]}', "bad_field");
    fails('{"type":"area","area":0,"full":true,"entities":[[1,2,3]],"gone":[]}', "bad_field");
    fails('{"type":"density","cols":1,"rows":1,"cells":"%%%"}', "bad_field");
    fails('{"type":"act","seq":1,"action":"pick","args":{"n":1.5}}', "bad_field");
    fails('{"type":"act","seq":1,"action":"pick","args":[1]}', "bad_field");
    fails('{"type":"act","seq":1,"action":"pick","dir":"up"}', "bad_field");
  });

  test("binary frames truncated, unknown or with bytes left over", () => {
    fails(bytes(), "bad_frame", "empty frame");
    fails(bytes(99), "bad_frame", "unknown message tag 99");
    fails(bytes(2, 0, 0, 0), "bad_frame");
    fails(bytes(2, 0, 0, 0, 1, 2, 0), "bad_frame", "1 unexpected bytes after the message");
    fails(bytes(2, 0, 0, 0, 1, 8), "bad_frame");
    fails(bytes(72, 0, 0, 0, 0, 2, 0, 0, 0, 0), "bad_frame");
    fails(bytes(71, 0, 0, 1, 0xff), "bad_frame");
    fails(bytes(70, 0, 1, 0, 1, 0, 0, 0, 5, 1), "bad_frame");
    fails(bytes(76, 0, 0, 0, 1, 0, 1, 0, 1, 0x6e, 3, 0, 0, 0), "bad_frame");
  });

  test("encode refuses a message that does not fit its definition", () => {
    assert.throws(() => encode({ type: "move", seq: 2 ** 32, dir: "n" }, "binary"));
    assert.throws(() => encode({ type: "move", seq: 1 }, "json"));
    assert.throws(() => encode({ type: "dance" }, "json"));
  });
});

describe("docs/protocol.md", () => {
  const doc = readFileSync(fileURLToPath(new URL("../../../docs/protocol.md", import.meta.url)), "utf8");

  test("lists every message with our tag and fields, in order", () => {
    const rows = [...doc.matchAll(/^\| `(\w+)` \| (\d+) \| (.*) \|$/gm)];
    const documented = Object.fromEntries(
      rows.map(([, type, tag, fields]) => [
        type,
        {
          tag: Number(tag),
          fields: [
            ...fields.matchAll(
              /`(\w+)` (?:u8|u16|u32|uvar|bool|string|bytes|vlist|list|direction|target|act result|say result|result|seed result|pattern|error code|bye reason|data)/g,
            ),
          ].map((match) => match[1]),
        },
      ]),
    );
    const ours = Object.fromEntries(
      Object.entries(definitions).map(([type, definition]) => [
        type,
        { tag: definition.tag, fields: Object.keys(definition.fields) },
      ]),
    );
    assert.deepEqual(ours, documented);
  });

  test("lists our enumerations in our order", () => {
    const list = (name) => {
      const line = doc.match(new RegExp(`^- \\*\\*${name}\\*\\*: (.*)$`, "m"));
      assert.ok(line, `no ${name} line`);
      return [...line[1].matchAll(/`(\w+)`/g)].map((match) => match[1]);
    };
    assert.deepEqual(list("direction"), [...protocol.directions]);
    assert.deepEqual(list("result"), [...protocol.results]);
    assert.deepEqual(list("error code"), [...protocol.errorCodes]);
    assert.deepEqual(list("bye reason"), [...protocol.byeReasons]);
    assert.deepEqual(list("pattern"), [...protocol.patterns]);
    assert.deepEqual(list("seed result"), [...protocol.seedResults]);
    assert.deepEqual(list("target"), [...protocol.targets]);
    assert.deepEqual(list("act result"), [...protocol.actResults]);
    assert.deepEqual(list("say result"), [...protocol.sayResults]);
  });

  test("gives the defaults of the optional fields", () => {
    assert.match(doc, /`view_radius` u8 \(optional, default 8/);
    assert.equal(definitions.join.fields.view_radius.default.value, 8);
    assert.match(doc, /`name` string \(optional, default ""\)/);
    assert.equal(definitions.join.fields.name.default.value, "");
  });
});
