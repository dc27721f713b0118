import { decode, encode, PROTOCOL_VERSION, ProtocolError, type Encoding, type Message, type Outgoing } from "./protocol.js";

export type ConnectionState = "connecting" | "connected" | "reconnecting" | "stopped";

/** The part of the WebSocket API a connection uses: the browser's, Node's (22 and up) or the `ws` package's. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ConnectionOptions {
  /** The server's WebSocket URL, e.g. `ws://127.0.0.1:4000/ws?encoding=binary`. */
  url: string;
  encoding: Encoding;
  /** Sent in `join`; the server caps it at 16. Undefined leaves the server's default. */
  viewRadius?: number | undefined;
  /** Sent in `join` when false: the server then sends no minimap. */
  minimap?: boolean | undefined;
  /**
   * Sent in `join`, asked for afresh before every join: the name to play
   * under ("" for one the server makes up; an account with a name plays
   * under its own). A name the server refuses stops the connection (the
   * `error` says why): fix it, then `restart()`.
   */
  name?: string | (() => string) | undefined;
  /** The token to join with, asked for afresh before every join ("" plays as a guest). */
  token?: (() => Promise<string> | string) | undefined;
  /** The WebSocket to use; default the global one (browsers, Node 22 and up). */
  WebSocket?: WebSocketConstructor | undefined;
  /** Whether to come back by itself when the connection is lost (default true). */
  reconnect?: boolean | undefined;
  /** The server refused the token: the next `token()` should log in again. */
  onUnauthorized?: (() => void) | undefined;
  /** A welcome follows: forget the areas held, they all come again. */
  onResync?: (() => void) | undefined;
  onMessage(message: Message): void;
  onState?: ((state: ConnectionState) => void) | undefined;
  /** Called with the ping round trip in milliseconds. */
  onRoundTrip?: ((milliseconds: number) => void) | undefined;
  /** A frame that could not be read (skipped; a resync follows). */
  onUnreadable?: ((error: ProtocolError) => void) | undefined;
}

// Reconnect delays grow from the first to the last, with some jitter so a
// restarted server is not met by every client in the same millisecond.
const FIRST_RETRY_MS = 250;
// A socket that closed before it opened may have been refused by a server
// too busy, full or stopping (a 503 with Retry-After: 1, which a browser's
// WebSocket does not show): the next try waits a second at least.
const REFUSED_RETRY_MS = 1000;
const LAST_RETRY_MS = 3000;
const PING_EVERY_MS = 1000;
// A connection silent this long (no pong to several pings) is taken as dead:
// a server that vanished without closing the socket would otherwise hang us.
const SILENCE_LIMIT_MS = 5000;
const OPEN = 1;

/** The ping clock: microseconds, wrapping at 2^32 like the u32 it travels in. */
function pingClock(): number {
  return Math.floor(performance.now() * 1000) >>> 0;
}

/**
 * One game session over a WebSocket that comes back by itself: it joins on
 * every (re)connection, pings once a second, and reconnects with backoff
 * when the socket closes or falls silent. Each new session starts with a
 * `welcome` and every area again, so the client that holds areas forgets
 * them then (`onResync`, and `WorldModel.applyWelcome`).
 *
 * A server's `bye` with `replaced` (the account plays elsewhere now) or
 * `unsupported_protocol` stops it for good: coming back would push the
 * other session out, or be refused again.
 */
export class Connection {
  private socket: WebSocketLike | undefined;
  private state: ConnectionState = "connecting";
  private retries = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private pingTimer: ReturnType<typeof setInterval> | undefined;
  private lastHeard = 0;
  private everJoined = false;
  // Counts restarts, so that a listener that restarts the connection is not undone.
  private generation = 0;
  private readonly WebSocket: WebSocketConstructor;

  constructor(private readonly options: ConnectionOptions) {
    const constructor =
      options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!constructor) {
      throw new Error("no WebSocket here: pass one, e.g. { WebSocket } from the ws package on Node before 22");
    }
    this.WebSocket = constructor;
  }

  get current(): ConnectionState {
    return this.state;
  }

  start(): void {
    void this.open();
  }

  /** Sends a message if the session is joined; returns whether it went out. */
  send(message: Outgoing): boolean {
    const socket = this.socket;
    if (this.state !== "connected" || !socket || socket.readyState !== OPEN) return false;
    socket.send(encode(message, this.options.encoding));
    return true;
  }

  /** Drops the current session, if any, and joins afresh (after `stop()` too). */
  restart(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = null;
      socket.close(1000, "rejoin");
    }
    clearInterval(this.pingTimer);
    this.retries = 0;
    this.generation++;
    this.setState(this.everJoined ? "reconnecting" : "connecting");
    void this.open();
  }

  /** Closes the connection for good. */
  stop(): void {
    clearInterval(this.pingTimer);
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.setState("stopped");
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = null;
      socket.close(1000, "bye");
    }
  }

  private async open(): Promise<void> {
    this.retryTimer = undefined;
    let token = "";
    try {
      token = (await this.options.token?.()) ?? "";
    } catch {
      // The join says whether guests may play; the reconnect loop retries.
    }
    if (this.state === "stopped") return;
    let socket: WebSocketLike;
    try {
      socket = new this.WebSocket(this.options.url);
    } catch {
      this.retry();
      return;
    }
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    let opened = false;

    socket.onopen = () => {
      opened = true;
      this.lastHeard = performance.now();
      this.startPinging();
      const join: Outgoing<"join"> = { type: "join", protocol: PROTOCOL_VERSION };
      if (this.options.viewRadius !== undefined) join.view_radius = this.options.viewRadius;
      if (this.options.minimap === false) join.minimap = false;
      const name = typeof this.options.name === "function" ? this.options.name() : this.options.name;
      if (name) join.name = name;
      if (token !== "") join.token = token;
      socket.send(encode(join, this.options.encoding));
    };
    socket.onmessage = (event) => {
      this.lastHeard = performance.now();
      let message: Message;
      try {
        message = decode(event.data as string | ArrayBuffer | Uint8Array);
      } catch (error) {
        // A frame we cannot read is the server's bug or a newer protocol:
        // skip it rather than lose the session, and ask for a full view in
        // case it was a view.
        if (!(error instanceof ProtocolError)) throw error;
        this.options.onUnreadable?.(error);
        this.options.onResync?.();
        this.send({ type: "resync" });
        return;
      }
      this.receive(message);
    };
    // The close that follows an error is where recovery happens.
    socket.onerror = () => {};
    socket.onclose = () => {
      if (this.socket === socket) this.lost(!opened);
    };
  }

  private receive(message: Message): void {
    let stopAfter = false;
    const generation = this.generation;
    switch (message.type) {
      case "welcome":
        this.retries = 0;
        this.everJoined = true;
        this.setState("connected");
        break;
      case "pong":
        this.options.onRoundTrip?.(((pingClock() - message.t) >>> 0) / 1000);
        break;
      case "error":
        // The world could not place us (full or busy): try again later.
        if (message.code === "join_failed" || message.code === "server_busy") this.drop();
        // Our token is no good any more: log in afresh and come back.
        if (message.code === "unauthorized") {
          this.options.onUnauthorized?.();
          this.drop();
        }
        // The same name would be refused again: wait for another, and restart().
        if (message.code === "invalid_name") stopAfter = true;
        break;
      case "bye":
        // Another session took this one's place: coming back would push it out in turn.
        // A server of another protocol version will not take us either.
        if (message.reason === "replaced" || message.reason === "unsupported_protocol") this.stop();
        break;
    }
    this.options.onMessage(message);
    // Unless a listener has restarted it already (with another name, say).
    if (stopAfter && generation === this.generation) this.stop();
  }

  // From the socket's opening: a server that never welcomes us counts as
  // silent too. Pings go out once joined (send() holds them back before).
  private startPinging(): void {
    clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => {
      if (performance.now() - this.lastHeard > SILENCE_LIMIT_MS) this.drop();
      else this.send({ type: "ping", t: pingClock() });
    }, PING_EVERY_MS);
  }

  /** Abandons the current socket, whatever its state, and reconnects. */
  private drop(): void {
    const socket = this.socket;
    this.socket = undefined;
    if (socket) {
      socket.onclose = null;
      socket.close();
    }
    this.lost();
  }

  private lost(refused = false): void {
    clearInterval(this.pingTimer);
    this.socket = undefined;
    if (this.state === "stopped") return;
    if (this.options.reconnect === false) {
      this.setState("stopped");
      return;
    }
    this.setState(this.everJoined ? "reconnecting" : "connecting");
    this.retry(refused);
  }

  private retry(refused = false): void {
    if (this.retryTimer !== undefined || this.state === "stopped") return;
    const base = Math.min(LAST_RETRY_MS, FIRST_RETRY_MS * 2 ** this.retries);
    this.retries++;
    // Jittered upwards from the second, not around it.
    const delay = refused
      ? Math.max(REFUSED_RETRY_MS, base) * (1 + Math.random() * 0.4)
      : base * (0.8 + Math.random() * 0.4);
    this.retryTimer = setTimeout(() => void this.open(), delay);
  }

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    this.options.onState?.(state);
  }
}
