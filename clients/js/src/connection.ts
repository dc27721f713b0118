import { decode, encode, PROTOCOL_VERSION, ProtocolError, type Encoding, type Message, type Outgoing } from "./protocol";

export type ConnectionState = "connecting" | "connected" | "reconnecting" | "stopped";

export interface ConnectionOptions {
  url: string;
  encoding: Encoding;
  /** Sent in `join`; the server caps it at 16. Undefined leaves the server's default. */
  viewRadius: number | undefined;
  /** The token to join with, fetched afresh before every join ("" for a guest). */
  token(): Promise<string>;
  /** The server refused the token: the next `token()` should log in again. */
  onUnauthorized(): void;
  /** About to ask for every area again: forget the ones held. */
  onResync(): void;
  onMessage(message: Message): void;
  onState(state: ConnectionState): void;
  /** Called with the ping round trip in milliseconds. */
  onRoundTrip(milliseconds: number): void;
}

// Reconnect delays grow from the first to the last, with some jitter so a
// restarted server is not met by every client in the same millisecond.
const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 3000;
const PING_EVERY_MS = 1000;
// A connection silent this long (no pong to several pings) is taken as dead:
// a server that vanished without closing the socket would otherwise hang us.
const SILENCE_LIMIT_MS = 5000;

/** The ping clock: microseconds, wrapping at 2^32 like the u32 it travels in. */
function pingClock(): number {
  return Math.floor(performance.now() * 1000) >>> 0;
}

/**
 * One game session over a WebSocket that comes back by itself: it joins on
 * every (re)connection, pings once a second, and reconnects with backoff
 * when the socket closes or falls silent.
 */
export class Connection {
  private socket: WebSocket | undefined;
  private state: ConnectionState = "connecting";
  private retries = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private pingTimer: ReturnType<typeof setInterval> | undefined;
  private lastHeard = 0;
  private everJoined = false;

  constructor(private readonly options: ConnectionOptions) {}

  get current(): ConnectionState {
    return this.state;
  }

  start(): void {
    void this.open();
  }

  /** Sends a message if the session is joined; returns whether it went out. */
  send(message: Outgoing): boolean {
    const socket = this.socket;
    if (this.state !== "connected" || !socket || socket.readyState !== WebSocket.OPEN) return false;
    socket.send(encode(message, this.options.encoding));
    return true;
  }

  private async open(): Promise<void> {
    this.retryTimer = undefined;
    const token = await this.options.token();
    if (this.state === "stopped") return;
    let socket: WebSocket;
    try {
      socket = new WebSocket(this.options.url);
    } catch (error) {
      console.warn("grove: cannot open", this.options.url, error);
      this.retry();
      return;
    }
    socket.binaryType = "arraybuffer";
    this.socket = socket;

    socket.onopen = () => {
      this.lastHeard = performance.now();
      this.startPinging();
      const join: Outgoing<"join"> = { type: "join", protocol: PROTOCOL_VERSION };
      if (this.options.viewRadius !== undefined) join.view_radius = this.options.viewRadius;
      if (token !== "") join.token = token;
      socket.send(encode(join, this.options.encoding));
    };
    socket.onmessage = (event: MessageEvent<string | ArrayBuffer>) => {
      this.lastHeard = performance.now();
      let message: Message;
      try {
        message = decode(event.data);
      } catch (error) {
        // A frame we cannot read is the server's bug or a newer protocol:
        // skip it rather than lose the session, and ask for a full view in
        // case it was a view.
        if (!(error instanceof ProtocolError)) throw error;
        console.warn("grove: unreadable frame:", error.message);
        this.options.onResync();
        this.send({ type: "resync" });
        return;
      }
      this.receive(message);
    };
    // Every error is followed by close, so recovery happens here alone.
    socket.onclose = () => {
      if (this.socket === socket) this.lost();
    };
  }

  private receive(message: Message): void {
    switch (message.type) {
      case "welcome":
        this.retries = 0;
        this.everJoined = true;
        this.setState("connected");
        break;
      case "pong":
        this.options.onRoundTrip(((pingClock() - message.t) >>> 0) / 1000);
        break;
      case "error":
        // The world could not place us (full or busy): try again later.
        if (message.code === "join_failed" || message.code === "server_busy") this.drop();
        // Our token is no good any more: log in afresh and come back.
        if (message.code === "unauthorized") {
          this.options.onUnauthorized();
          this.drop();
        }
        break;
      case "bye":
        // Another session took this one's place: coming back would push it out in turn.
        // A server of another protocol version will not take us either.
        if (message.reason === "replaced" || message.reason === "unsupported_protocol") this.stop();
        break;
    }
    this.options.onMessage(message);
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

  private lost(): void {
    clearInterval(this.pingTimer);
    this.socket = undefined;
    if (this.state === "stopped") return;
    this.setState(this.everJoined ? "reconnecting" : "connecting");
    this.retry();
  }

  private retry(): void {
    if (this.retryTimer !== undefined || this.state === "stopped") return;
    const base = Math.min(LAST_RETRY_MS, FIRST_RETRY_MS * 2 ** this.retries);
    this.retries++;
    const delay = base * (0.8 + Math.random() * 0.4);
    this.retryTimer = setTimeout(() => void this.open(), delay);
  }

  private stop(): void {
    clearInterval(this.pingTimer);
    clearTimeout(this.retryTimer);
    this.setState("stopped");
    const socket = this.socket;
    this.socket = undefined;
    socket?.close();
  }

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    this.options.onState(state);
  }
}
