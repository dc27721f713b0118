import { Connection, type ConnectionState, type WebSocketConstructor } from "./connection.js";
import { Emitter } from "./emitter.js";
import { MovePacer } from "./pacer.js";
import type {
  Acted,
  Announcement,
  Data,
  Direction,
  Encoding,
  Message,
  Outcome,
  Pattern,
  ProtocolError,
  Said,
  Seeded,
  Stats,
  Target,
  Welcome,
} from "./protocol.js";
import { WorldModel, type Entity, type GameEvent, type Label } from "./world.js";

export interface ClientOptions {
  /**
   * Where the server is: its page (`http://host:4000/`) or its WebSocket
   * (`ws://host:4000/ws`); the encoding is added to it.
   */
  url: string;
  /** `binary` (compact) or `json` (readable); default `binary`. */
  encoding?: Encoding | undefined;
  /**
   * The name to play under, or a function giving it before each join (an
   * account with a name plays under its own; with none, the server makes
   * one up). A name the server refuses stops the client with an `error`
   * (`invalid_name`, saying why): `rejoin()` with another.
   */
  name?: string | (() => string) | undefined;
  /** A bearer token from the HTTP API (docs/api.md), or a function giving one before each join. */
  token?: string | (() => Promise<string> | string) | undefined;
  /** Cells seen each way (default the server's, 8; at most 16). */
  viewRadius?: number | undefined;
  /** Whether the server sends the minimap (`density`, `colonies`, `places`); default true. */
  minimap?: boolean | undefined;
  /** The WebSocket to use (default the global one; on Node before 22, the `ws` package's). */
  WebSocket?: WebSocketConstructor | undefined;
  /** Come back by itself after a lost connection, with every area again (default true). */
  reconnect?: boolean | undefined;
}

/** What a client tells its listeners (`client.on(name, listener)`). */
export interface ClientEvents {
  /** Joined (and joined again after a reconnect): who and where the player is. */
  welcome: Welcome;
  /** A move's outcome, whoever sent the move. */
  outcome: Outcome;
  /** A seed's answer. */
  seeded: Seeded;
  /** An action's answer (a game's; docs/protocol.md, "Games"). */
  acted: Acted;
  /** A line's answer (`say`). */
  said: Said;
  /**
   * A line said by a player in view (the player's own included), with its
   * name and avatar when known; never one of a muted player.
   */
  chat: ChatLine;
  /** The operator's words to every player. */
  announcement: Announcement;
  /** An event an area held told its viewers: a game's (a sound, a splash), a chat's (not a muted player's). */
  event: GameEvent;
  /** The areas in view changed: the viewport as the client now sees it. */
  view: View;
  /** The server's numbers, every two seconds or so. */
  stats: Stats;
  /**
   * Something went wrong: an `error` from the server, or a frame that could
   * not be read. `unauthorized` means the token is no good any more: the
   * next join asks `token()` again.
   */
  error: ClientError;
  /** The server said goodbye, with why. */
  bye: Message<"bye">;
  /** Connecting, connected, reconnecting, or stopped for good. */
  state: ConnectionState;
  /** Every message from the server, as decoded, once the world has taken it in, before the events above. */
  message: Message;
  /** A ping's round trip, in milliseconds (a ping goes out every second). */
  roundTrip: number;
}

/** A line said by a player in view. */
export interface ChatLine {
  /** The speaker's entity. */
  id: number;
  /** Where the speaker stood. */
  x: number;
  y: number;
  text: string;
  /** The speaker's name and avatar, when the client knows them. */
  name?: string | undefined;
  avatar?: string | undefined;
  /** Said by this client's own player. */
  self: boolean;
}

/** An error the server sent, or a frame the client could not read. */
export interface ClientError {
  code: Message<"error">["code"] | ProtocolError["code"];
  message: string;
}

/** The player's viewport: its cell and the entities around it, players with their names. */
export interface View {
  id: number;
  x: number;
  y: number;
  radius: number;
  entities: (Entity & Partial<Label>)[];
}

/** A move, seed or join left without an answer: the connection was lost or closed first. */
export class ConnectionLost extends Error {
  constructor() {
    super("the connection was lost before the server answered");
    this.name = "ConnectionLost";
  }
}

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: Error): void;
}

/**
 * A player of a Grove world, from a browser or from Node: it connects,
 * joins, walks, seeds, acts (a game's actions) and chats, keeps the areas around it as a viewport, comes
 * back by itself after a lost connection (joining again, with every area
 * again), and says what happens as events.
 *
 * ```ts
 * const client = new GroveClient({ url: "http://127.0.0.1:4000/", name: "bot" });
 * const welcome = await client.connect();
 * const outcome = await client.move("e"); // { result: "ok", x, y, ... }
 * client.on("view", (view) => console.log(view.entities.length, "around"));
 * ```
 *
 * Moves are answered in order of the server's deciding, each exactly once
 * (`outcome`); `move()` numbers them itself. A client that sends its own
 * moves with `send()` numbers them itself too, and should not mix the two.
 */
export class GroveClient {
  /** What the client knows of the world: its own cell and the areas around it. */
  readonly world = new WorldModel();
  private readonly connection: Connection;
  private readonly events = new Emitter<ClientEvents>();
  private nextSeq = 1;
  private readonly moves = new Map<number, Waiter<Outcome>>();
  private readonly seeds = new Map<number, Waiter<Seeded>>();
  private readonly acts = new Map<number, Waiter<Acted>>();
  private readonly says = new Map<number, Waiter<Said>>();
  private readonly muted = new Set<number>();
  private welcomed: Waiter<Welcome>[] = [];
  private viewQueued = false;
  private started = false;
  private readonly pacer = new MovePacer();

  constructor(options: ClientOptions) {
    const encoding = options.encoding ?? "binary";
    const token = options.token;
    this.connection = new Connection({
      url: socketUrl(options.url, encoding),
      encoding,
      viewRadius: options.viewRadius,
      minimap: options.minimap,
      name: options.name,
      token: typeof token === "function" ? token : () => token ?? "",
      WebSocket: options.WebSocket,
      reconnect: options.reconnect,
      onResync: () => this.world.forgetAreas(),
      onMessage: (message) => this.receive(message),
      onState: (state) => this.changed(state),
      onRoundTrip: (milliseconds) => this.events.emit("roundTrip", milliseconds),
      onUnreadable: (error) => this.events.emit("error", { code: error.code, message: error.message }),
    });
  }

  /** Connecting, connected, reconnecting, or stopped. */
  get state(): ConnectionState {
    return this.connection.current;
  }

  /** Listens to an event; returns a function that stops listening. */
  on<K extends keyof ClientEvents>(name: K, listener: (value: ClientEvents[K]) => void): () => void {
    return this.events.on(name, listener);
  }

  /** Resolves with the next event of that name. */
  once<K extends keyof ClientEvents>(name: K): Promise<ClientEvents[K]> {
    return new Promise((resolve) => {
      const off = this.events.on(name, (value) => {
        off();
        resolve(value);
      });
    });
  }

  /** Connects and joins; resolves with the `welcome` (rejects if the client is stopped first). */
  connect(): Promise<Welcome> {
    if (this.connection.current === "stopped") return Promise.reject(new ConnectionLost());
    const welcome = new Promise<Welcome>((resolve, reject) => this.welcomed.push({ resolve, reject }));
    if (!this.started) {
      this.started = true;
      this.connection.start();
    }
    return welcome;
  }

  /**
   * One step; resolves with its outcome (`result` is `ok` or why not, `x,
   * y` where the player stands then). Steps asked for faster than the
   * server's limit wait their turn here rather than being dropped there.
   */
  async move(direction: Direction): Promise<Outcome> {
    while (!this.pacer.take()) await new Promise((resolve) => setTimeout(resolve, this.pacer.wait()));
    const seq = this.nextSeq++;
    return this.ask(this.moves, seq, { type: "move", seq, dir: direction });
  }

  /** Seeds a pattern of bacteria in front of the player, facing `direction`; resolves with the answer. */
  seed(pattern: Pattern, direction: Direction): Promise<Seeded> {
    const seq = this.nextSeq++;
    return this.ask(this.seeds, seq, { type: "seed", seq, pattern, dir: direction });
  }

  /**
   * An action of the world's game (`GET /game` lists them), aimed at the
   * player's own cell (`here`) or the next one in a direction, with its
   * arguments; resolves with the answer (`result` is `ok`, with the game's
   * `data`, or why not, with a `reason`).
   */
  act(action: string, target: Target = "here", args: Data = {}): Promise<Acted> {
    const seq = this.nextSeq++;
    return this.ask(this.acts, seq, { type: "act", seq, action, dir: target, args });
  }

  /**
   * Says a line to the players who see this one (docs/protocol.md,
   * "Chat"); resolves with the answer: `result` is `ok`, or what is wrong
   * (`empty`, `too_long`, `bad_character`, `rate_limited`, ...) with a
   * `reason` in words.
   */
  say(text: string): Promise<Said> {
    const seq = this.nextSeq++;
    return this.ask(this.says, seq, { type: "say", seq, text });
  }

  /**
   * Mutes a player (by entity id): its lines are dropped before any
   * `chat` or `event` listener hears of them. The server still sends them
   * (every viewer gets the same bytes); a mute lasts while this client
   * lives, and the player keeps its id while it stays connected.
   */
  mute(id: number): void {
    this.muted.add(id);
  }

  /** Hears a muted player again. */
  unmute(id: number): void {
    this.muted.delete(id);
  }

  /** Whether a player is muted. */
  isMuted(id: number): boolean {
    return this.muted.has(id);
  }

  /** The players muted, by entity id. */
  mutedIds(): number[] {
    return [...this.muted];
  }

  /** The viewport now: the player's cell and the entities within its radius. */
  view(): View {
    return {
      id: this.world.selfId ?? 0,
      x: this.world.x,
      y: this.world.y,
      radius: this.world.viewRadius,
      entities: this.world.inView().map((entity) => ({ ...entity, ...this.world.labelOf(entity.id) })),
    };
  }

  /** The named players in view, nearest first, with their distance in cells. */
  nearby(): ReturnType<WorldModel["nearby"]> {
    return this.world.nearby();
  }

  /**
   * Leaves the current session and joins again, as a new one (to play
   * under another name, say); resolves with the new welcome.
   */
  rejoin(): Promise<Welcome> {
    const welcome = new Promise<Welcome>((resolve, reject) => this.welcomed.push({ resolve, reject }));
    this.started = true;
    this.connection.restart();
    return welcome;
  }

  /** Sends any client message as it is (see docs/protocol.md); false when not connected. */
  send(message: Parameters<Connection["send"]>[0]): boolean {
    return this.connection.send(message);
  }

  /** Leaves for good: closes the connection, and what waits for an answer is rejected. */
  close(): void {
    this.connection.stop();
    this.failWaiting();
  }

  private ask<T>(waiting: Map<number, Waiter<T>>, seq: number, message: Parameters<Connection["send"]>[0]): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (!this.connection.send(message)) {
        reject(new ConnectionLost());
        return;
      }
      waiting.set(seq, { resolve, reject });
    });
  }

  private receive(message: Message): void {
    // The world first, so that every listener sees it as the message left it.
    let told: GameEvent[] = [];
    switch (message.type) {
      case "welcome":
        this.world.applyWelcome(message);
        break;
      case "area":
        // Events of an area not held (its snapshot still to come) are not for us.
        if (this.world.holds(message.area) || message.full)
          told = (message.events ?? [])
            .map(([id, x, y, name, data]) => ({ id, x, y, name, data }))
            .filter((event) => !(event.name === "chat" && this.muted.has(event.id)));
        this.world.applyArea(message);
        break;
      case "areas":
        for (const part of message.areas) this.world.applyPart(part);
        break;
      case "area_closed":
        this.world.closeArea(message.area);
        break;
      case "names":
        this.world.applyNames(message);
        break;
      case "ground":
        this.world.applyGround(message);
        break;
      case "outcome":
        this.world.applyOutcome(message);
        break;
    }
    this.events.emit("message", message);
    switch (message.type) {
      case "welcome":
        for (const waiter of this.welcomed.splice(0)) waiter.resolve(message);
        this.events.emit("welcome", message);
        break;
      case "area":
        for (const event of told) {
          this.events.emit("event", event);
          if (event.name === "chat" && typeof event.data.text === "string" && this.sees(event.x, event.y)) {
            const label = this.world.labelOf(event.id);
            this.events.emit("chat", {
              id: event.id,
              x: event.x,
              y: event.y,
              text: event.data.text,
              name: label?.name,
              avatar: label?.avatar,
              self: event.id === this.world.selfId,
            });
          }
        }
        this.viewChanged();
        break;
      case "areas":
        this.viewChanged();
        break;
      case "said": {
        const waiter = this.says.get(message.seq);
        this.says.delete(message.seq);
        waiter?.resolve(message);
        this.events.emit("said", message);
        break;
      }
      case "announcement":
        this.events.emit("announcement", message);
        break;
      case "area_closed":
        this.viewChanged();
        break;
      case "outcome": {
        const waiter = this.moves.get(message.seq);
        this.moves.delete(message.seq);
        waiter?.resolve(message);
        this.events.emit("outcome", message);
        this.viewChanged();
        break;
      }
      case "seeded": {
        const waiter = this.seeds.get(message.seq);
        this.seeds.delete(message.seq);
        waiter?.resolve(message);
        this.events.emit("seeded", message);
        break;
      }
      case "acted": {
        const waiter = this.acts.get(message.seq);
        this.acts.delete(message.seq);
        waiter?.resolve(message);
        this.events.emit("acted", message);
        break;
      }
      case "stats":
        this.events.emit("stats", message);
        break;
      case "error":
        // The join was refused for its name: say why to whoever waits for it.
        if (message.code === "invalid_name") {
          for (const waiter of this.welcomed.splice(0)) waiter.reject(new Error(`invalid_name: ${message.message}`));
        }
        this.events.emit("error", { code: message.code, message: message.message });
        break;
      case "bye":
        this.events.emit("bye", message);
        break;
    }
  }

  // Whether a cell is in the viewport: the lines of players out of view
  // (whose area the viewport overlaps) are not ours to show.
  private sees(x: number, y: number): boolean {
    const radius = this.world.viewRadius;
    return Math.abs(x - this.world.x) <= radius && Math.abs(y - this.world.y) <= radius;
  }

  // Areas come several at a time: one `view` event for what arrived together.
  private viewChanged(): void {
    if (this.viewQueued) return;
    this.viewQueued = true;
    queueMicrotask(() => {
      this.viewQueued = false;
      this.events.emit("view", this.view());
    });
  }

  private changed(state: ConnectionState): void {
    // What was sent on a lost connection will never be answered.
    if (state !== "connected") this.failWaiting(state === "stopped");
    this.events.emit("state", state);
  }

  private failWaiting(andJoins = true): void {
    for (const waiter of this.moves.values()) waiter.reject(new ConnectionLost());
    for (const waiter of this.seeds.values()) waiter.reject(new ConnectionLost());
    for (const waiter of this.acts.values()) waiter.reject(new ConnectionLost());
    for (const waiter of this.says.values()) waiter.reject(new ConnectionLost());
    this.moves.clear();
    this.seeds.clear();
    this.acts.clear();
    this.says.clear();
    if (andJoins) for (const waiter of this.welcomed.splice(0)) waiter.reject(new ConnectionLost());
  }

}

/** `http://h:p/...` or `ws://h:p/ws` to the WebSocket URL with its encoding. */
export function socketUrl(url: string, encoding: Encoding): string {
  const parsed = new URL(url);
  if (parsed.protocol === "http:") parsed.protocol = "ws:";
  else if (parsed.protocol === "https:") parsed.protocol = "wss:";
  if (!parsed.pathname.endsWith("/ws")) parsed.pathname = "/ws";
  parsed.searchParams.set("encoding", encoding);
  return parsed.toString();
}
