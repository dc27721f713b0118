import "./style.css";
import { GroveClient, type ConnectionState } from "@grove/client";
import { Hud } from "./hud";
import { Keyboard, typing } from "./input";
import { Minimap } from "./minimap";
import { MoveLog } from "./moves";
import {
  MovePacer,
  PROTOCOL_VERSION,
  patterns,
  type ActResult,
  type Data,
  type Direction,
  type Encoding,
  type Message,
  type MoveResult,
  type Outcome,
  type Pattern,
  type SeedResult,
  type Stats,
} from "@grove/client";
import { ChatPanel } from "./chat";
import { aim, fetchBoard, fetchGame, fitting, GameControls, type ActionInfo, type GameInfo } from "./game";
import { Identity } from "./identity";
import { NearbyList } from "./nearby";
import { saveName, savedName, YouPanel, type Choice } from "./you";
import { fetchKinds, Kinds } from "./kinds";
import { fetchTerrain, type Terrain } from "./terrain";
import { BoardGestures, Pad, type PadAction } from "./touch";
import { Viewport } from "./viewport";

// Page options: ?encoding=binary picks the binary wire format, ?view=N a
// viewport radius other than the server's default.
const params = new URLSearchParams(location.search);
const encoding: Encoding = params.get("encoding") === "binary" ? "binary" : "json";
const requestedRadius = Number.parseInt(params.get("view") ?? "", 10);

const moves = new MoveLog();
const pacer = new MovePacer();
const hud = new Hud();
const viewport = new Viewport(document.getElementById("viewport") as HTMLElement);
const minimap = new Minimap(document.getElementById("minimap") as HTMLCanvasElement);

// The whole world's ground, for the minimap, where the world is small
// enough to be sent whole; the viewport draws each area's own ground.
let terrain: Terrain | undefined;
// The most cells `GET /terrain` sends (docs/protocol.md).
const WHOLE_TERRAIN_CELLS = 2048 * 2048;
let wholeTerrain: boolean | undefined;
let kinds = new Kinds();
let lastStats: Stats | undefined;
let roundTripMs: number | undefined;
let welcomes = 0;
let pongs = 0;
let densities = 0;
let colonies = 0;
let places = 0;
// The way the player last moved, which it faces, and the pattern E seeds.
let facing: Direction = "e";
let pattern: Pattern = "glider";
let seedSeq = 0;
const seedResults: { seq: number; result: SeedResult }[] = [];
let renderQueued = false;

const refusals: Partial<Record<MoveResult, string>> = {
  out_of_bounds: "That is the edge of the world.",
  blocked: "Something is in the way.",
  occupied: "Someone is standing there.",
  rate_limited: "Easy, not so fast!",
  busy: "The world is busy, try again.",
};

const seedRefusals: Partial<Record<SeedResult, string>> = {
  out_of_bounds: "No room for it before the edge of the world.",
  zone_edge: "Too close to the edge of a zone: step away a little.",
  blocked: "Something is in the way.",
  occupied: "Something already lives there.",
  rate_limited: "One pattern at a time!",
  busy: "The world is busy, try again.",
  disabled: "No bacteria in this world.",
  interrupted: "It did not take, try again.",
};

const identity = new Identity();

// The page plays through the client library (clients/js): the protocol,
// the connection that comes back by itself, and the areas as a viewport.
// It numbers its own moves (MoveLog times each from key press to screen).
const connection = new GroveClient({
  url: location.href,
  encoding,
  viewRadius: Number.isInteger(requestedRadius) && requestedRadius > 0 ? requestedRadius : undefined,
  token: () => identity.token(),
  name: savedName,
});
const world = connection.world;
connection.on("message", receive);

// The world's game, when it has one (GET /game): its controls, its answers.
let gameInfo: GameInfo | undefined;
let controls: GameControls | undefined;
const actResults: { seq: number; action: string; result: ActResult; data: Data; reason: string }[] = [];
const codeAt = (x: number, y: number): number => world.cellCode(x, y);
const gameLayer = {
  cell: (x: number, y: number) => gameInfo?.cells.get(world.cellCode(x, y)),
  look: (id: number) => {
    const look = world.lookOf(id);
    return look > 0 ? gameInfo?.looks.get(look)?.emoji : undefined;
  },
};
connection.on("event", (event) => {
  const emoji = gameInfo?.events.get(event.name);
  if (emoji) viewport.pop(event.x, event.y, emoji, world);
});
connection.on("state", (state: ConnectionState) => {
  hud.setState(state);
  if (state !== "connected") moves.forgetPending();
});
connection.on("roundTrip", (milliseconds: number) => {
  pongs++;
  roundTripMs = milliseconds;
  hud.setRoundTrip(milliseconds);
});
connection.on("error", (error) => {
  // The token is no good any more: log in afresh before joining again.
  if (error.code === "unauthorized") identity.forget();
  // The name was refused: say why, and play on under the one before.
  if (error.code === "invalid_name") {
    hud.flash(`That name will not do: ${error.message.replace(/^name: /, "")}.`);
    saveName(nameBefore);
    void connection.rejoin().catch(() => {});
  }
});

// Nearby chat: the log and input under the board, bubbles over the speakers.
const chat = new ChatPanel(
  connection,
  document.getElementById("chat") as HTMLElement,
  { say: (line) => viewport.say(line.id, line.text, world), drop: (id) => viewport.unsay(id) },
  (text) => hud.flash(text),
);

// Who the player is to the others, and who is around.
let nameBefore = savedName();
const you = new YouPanel(choose, () => identity.hasAccount);
const nearby = new NearbyList(document.getElementById("nearby") as HTMLElement, document.getElementById("nearby-count") as HTMLElement);

async function choose(choice: Choice): Promise<void> {
  if (choice.avatar) {
    try {
      await identity.setAvatar(choice.avatar);
    } catch (error) {
      hud.flash(`That avatar will not do: ${(error as Error).message}.`);
      return;
    }
  }
  nameBefore = savedName();
  saveName(choice.name);
  void connection.rejoin().catch(() => {});
}

function receive(message: Message): void {
  switch (message.type) {
    case "welcome":
      welcomes++;
      if (message.protocol !== PROTOCOL_VERSION) {
        console.warn(`grove: the server speaks protocol ${message.protocol}, this page ${PROTOCOL_VERSION}`);
      }
      for (const element of document.querySelectorAll<HTMLElement>(".you")) element.textContent = world.avatar;
      you.show(message.name, world.avatar);
      // The whole world's ground, for the minimap, only where the world is
      // small enough to be sent whole (a larger one's comes area by area);
      // after a reconnect the server may be a new one, with new ground.
      if (world.width * world.height > WHOLE_TERRAIN_CELLS) {
        terrain = undefined;
        wholeTerrain = false;
      } else if (welcomes > 1 || !terrain || terrain.width !== world.width || terrain.height !== world.height) {
        loadTerrain();
      }
      // Each server names its own kinds and game: ask again after every reconnect.
      if (welcomes > 1) {
        loadKinds();
        loadGame();
      }
      renderNow();
      break;
    case "area":
    case "areas":
    case "area_closed":
      renderSoon();
      break;
    case "outcome":
      settle(message);
      break;
    case "stats":
      lastStats = message;
      hud.setStats(message);
      break;
    case "density":
      densities++;
      minimap.setDensity(message);
      break;
    case "places":
      places++;
      minimap.setPlaces(message);
      break;
    case "colonies":
      colonies++;
      minimap.setColonies(message);
      break;
    case "seeded":
      seedResults.push({ seq: message.seq, result: message.result });
      hud.flash(
        message.result === "ok"
          ? `🦠 A ${pattern.replace("_", "-")} will come alive at the next generation.`
          : (seedRefusals[message.result] ?? `Cannot seed there (${message.result}).`),
      );
      break;
    case "error":
      if (message.code === "rate_limited") hud.flash(refusals.rate_limited as string);
      else if (message.code !== "invalid_name") console.warn(`grove: server error ${message.code}: ${message.message}`);
      break;
    case "bye":
      hud.flash(
        message.reason === "unsupported_protocol" || message.reason === "replaced"
          ? message.message
          : `The server said goodbye (${message.reason}).`,
      );
      break;
  }
}

function settle(outcome: Outcome): void {
  const move = moves.settle(outcome);
  renderNow();
  if (outcome.result === "ok") {
    hud.moveSettled(outcome.seq, undefined);
    // The avatar is in the DOM now; the next animation frame is when it is seen.
    if (move) {
      const answeredAt = performance.now();
      requestAnimationFrame(() => moves.recordShown(move, answeredAt, performance.now()));
    }
  } else {
    viewport.bump(move?.direction);
    hud.moveSettled(outcome.seq, refusals[outcome.result] ?? `Cannot go there (${outcome.result}).`);
  }
}

// A press waits here for the pacer when keys come faster than it allows;
// only the newest is kept, as a player expects.
let waiting: { direction: Direction; startedAt: number } | undefined;
let waitTimer: ReturnType<typeof setTimeout> | undefined;

function requestMove(direction: Direction, startedAt: number, repeated: boolean): void {
  if (connection.state !== "connected") return;
  if (!waiting && pacer.take()) {
    sendMove(direction, startedAt);
  } else if (!repeated) {
    waiting = { direction, startedAt };
    clearTimeout(waitTimer);
    waitTimer = setTimeout(sendWaiting, pacer.wait());
  }
}

function sendWaiting(): void {
  const next = waiting;
  waiting = undefined;
  if (next && connection.state === "connected") {
    if (pacer.take()) sendMove(next.direction, next.startedAt);
    else requestMove(next.direction, next.startedAt, false);
  }
}

function sendMove(direction: Direction, startedAt: number): void {
  facing = direction;
  const move = moves.start(direction, startedAt);
  connection.send({ type: "move", seq: move.seq, dir: direction });
}

// E (or the pad's action button, or a tap on the avatar) seeds the chosen
// pattern in front of the player; Q (or the pad's pattern button) picks the next.
function seed(): void {
  if (connection.state !== "connected") return;
  seedSeq++;
  connection.send({ type: "seed", seq: seedSeq, pattern, dir: facing });
}

function nextPattern(): void {
  pattern = patterns[(patterns.indexOf(pattern) + 1) % patterns.length] as Pattern;
  hud.flash(`🦠 E now seeds a ${patternName(pattern)}.`);
  relabelPattern(patternName(pattern));
}

function patternName(name: Pattern): string {
  return name.replace("_", "-");
}

function seedKeys(event: KeyboardEvent): void {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat || typing(event)) return;
  if (event.code === "KeyE") seed();
  else if (event.code === "KeyQ") nextPattern();
  // "/" opens the chat (Enter is left alone: a stray one must not take the arrows away).
  else if (event.key === "/") {
    event.preventDefault();
    chat.open();
  }
}

/** An action of the game, aimed where it fits (see game.ts): the page's keys, buttons and taps all come here. */
function act(action: ActionInfo): void {
  if (connection.state !== "connected") return;
  connection.act(action.name, aim(action, world, facing, codeAt)).then(
    (answer) => {
      actResults.push({ seq: answer.seq, action: action.name, result: answer.result, data: answer.data, reason: answer.reason });
      const refusal = controls?.acted(answer.result, answer.data, answer.reason);
      if (refusal) hud.flash(refusal);
      // A score may have changed: the board, soon, rather than at its next turn.
      else if (gameInfo?.board) boardSoon();
    },
    // The connection went before the answer: the action may or may not have been done.
    () => {},
  );
}

function loadGame(): void {
  fetchGame().then(
    (info) => {
      gameInfo = info;
      const root = document.getElementById("game") as HTMLElement;
      if (!info) {
        controls = undefined;
        root.hidden = true;
        return;
      }
      controls = new GameControls(root, info, act);
      // The pad's action button (and a tap on the avatar) does what fits, as Space does.
      pad.setAction({
        label: "✋ Act",
        title: "Do what fits what is next to you",
        run: () => {
          const action = fitting(controls?.actions ?? [], world, facing, codeAt);
          if (action) act(action);
          else hud.flash("Nothing to do right here.");
        },
      });
      if (info.board) loadBoard();
      renderNow();
    },
    (error: unknown) => console.warn("grove: no game description yet:", error),
  );
}

// The leaderboard, every ten seconds while the page is open, and a second
// after the player's own action changed something.
let boardTimer: ReturnType<typeof setTimeout> | undefined;
function boardSoon(): void {
  clearTimeout(boardTimer);
  boardTimer = setTimeout(loadBoard, 1000);
}

function loadBoard(): void {
  clearTimeout(boardTimer);
  fetchBoard().then(
    (entries) => controls?.setBoard(entries),
    (error: unknown) => console.warn("grove: no leaderboard:", error),
  );
  boardTimer = setTimeout(loadBoard, 10_000);
}

function loadTerrain(): void {
  fetchTerrain().then(
    (loaded) => {
      terrain = loaded;
      wholeTerrain = loaded !== undefined;
      if (loaded) minimap.setTerrain(loaded);
      renderNow();
    },
    (error: unknown) => {
      console.warn("grove: no terrain yet:", error);
      // Retry with the next welcome, or shortly if the session is up.
      if (connection.state === "connected") setTimeout(loadTerrain, 2000);
    },
  );
}

function loadKinds(): void {
  fetchKinds().then(
    (loaded) => {
      kinds = loaded;
      renderNow();
    },
    // Without the legend every actor is drawn with a face of its own.
    (error: unknown) => console.warn("grove: no kinds of actors yet:", error),
  );
}

function renderNow(): void {
  viewport.render(world, terrain, kinds, gameLayer);
  nearby.render(world.nearby());
  if (controls && world.selfId !== undefined) controls.setOwnLook(world.lookOf(world.selfId));
  hud.setPosition(world.x, world.y);
  minimap.setPlayer(world.x, world.y, world.viewRadius, world.width, world.height);
}

// Areas can come several to a frame; draw once per frame.
function renderSoon(): void {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderNow();
  });
}

/** The hook tests and the keypress bench read the game through. */
const hook = {
  state: () => ({
    connected: connection.state === "connected",
    connection: connection.state,
    encoding,
    protocol: world.protocol,
    id: world.selfId,
    x: world.x,
    y: world.y,
    width: world.width,
    height: world.height,
    viewRadius: world.viewRadius,
    entities: viewport.entityCount,
    seq: moves.lastSeq,
    welcomes,
    terrainLoaded: terrain !== undefined,
    /** False once the server said its world is too large to send whole. */
    wholeTerrain,
  }),
  /** The last `stats`, the last ping round trip, and how many pongs and minimaps came. */
  stats: () => ({ ...lastStats, roundTripMs, pongs, densities, colonies, places }),
  /** The region the minimap draws around the player in a world too large to picture whole, or undefined. */
  minimap: () => minimap.region(),
  /** The outcomes of the patterns seeded so far, and what E seeds now, facing where. */
  seeds: () => ({ results: seedResults.slice(), pattern, facing }),
  /** Milliseconds from key press to the frame showing the avatar moved, per successful move. */
  moveLatencies: () => moves.timings.map((timing) => timing.shown),
  /** The same moves, with when each was sent and answered. */
  moveTimings: () => moves.timings.slice(),
  /** Resolves with the result of move `seq` once it is refused or shown. */
  moveDone: (seq: number) => moves.whenDone(seq),
  moveResults: () => moves.results.slice(),
  /** The ground, the game's code and the entity the client knows at a cell. */
  cellAt: (x: number, y: number) => ({
    terrain: world.groundAt(x, y) ?? terrain?.at(x, y),
    code: world.cellCode(x, y),
    entity: world.entityAt(x, y),
  }),
  /** The ground at a cell as the areas brought it (protocol 3), whatever was fetched whole. */
  areaGroundAt: (x: number, y: number) => world.groundAt(x, y),
  /** The named players in view, nearest first; a player's name and avatar by id. */
  nearby: () => world.nearby(),
  labelOf: (id: number) => world.labelOf(id),
  /** The game: its name and actions, the cells shown, the answers to actions, the player's look and facing. */
  game: () => ({
    game: gameInfo?.game,
    actions: gameInfo?.actions.map((action) => action.name) ?? [],
    cells: world.gameCells(),
    acts: actResults.slice(),
    look: world.selfId === undefined ? 0 : world.lookOf(world.selfId),
    facing,
  }),
  /** Asks for an action as its button would. */
  act: (name: string) => {
    const action = gameInfo?.actions.find((candidate) => candidate.name === name);
    if (action) act(action);
  },
  /** The chat: the page's log, the answers to the lines said, the bubbles shown, who is muted. */
  chat: () => ({
    entries: chat.entries.slice(),
    answers: chat.answers.slice(),
    bubbles: viewport.shownBubbles(),
    muted: connection.mutedIds(),
  }),
  /** Every entity the client holds, own avatar included, in world coordinates. */
  entities: () => [...world.entities.values()].map((entity) => ({ ...entity })),
};

declare global {
  interface Window {
    grove: typeof hook;
  }
}
window.grove = hook;

new Keyboard(requestMove).attach(window);
window.addEventListener("keydown", seedKeys);
window.addEventListener("keydown", (event) => {
  if (controls && connection.state === "connected" && !typing(event))
    controls.keyDown(event, () => fitting(controls?.actions ?? [], world, facing, codeAt));
});

// Touch and pointer: gestures on the board, and the pad on touch screens
// (or with ?pad=on). The pad's action button seeds until a game's client
// module gives it its own action with `pad.setAction`.
const seedAction: PadAction = { label: "🦠", title: "Seed bacteria in front of you", run: seed };
const pad = new Pad(document.getElementById("pad") as HTMLElement, requestMove, seedAction);
const relabelPattern = pad.addButton("🦠", patternName(pattern), "Pick the pattern to seed", nextPattern);
pad.addButton("💬", "Chat", "Say something to the players around you", () => chat.open());
new BoardGestures(document.getElementById("viewport") as HTMLElement, requestMove, () => pad.activate()).attach();
if (params.get("pad") === "on") document.body.classList.add("touch");
window.addEventListener("pointerdown", (event) => {
  if (event.pointerType === "touch") document.body.classList.add("touch");
});
hud.setState(connection.state);
loadKinds();
loadGame();
void connection.connect().catch(() => {});
