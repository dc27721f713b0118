/**
 * Grove's client library: play a Grove world from a browser or from Node.
 *
 *   * `GroveClient` - connect, join, move, seed, act, say; the viewport; events.
 *   * `Connection` - the WebSocket session underneath: join, ping, reconnect.
 *   * `WorldModel` - the areas the server sends, assembled into a viewport.
 *   * `encode`, `decode`, `definitions` - every message of the protocol
 *     (docs/protocol.md), typed, in JSON and binary.
 *   * `MovePacer` - a token bucket under the server's move limit.
 *   * `deviceLogin` - a token from the HTTP API, waiting out a busy
 *     server's Retry-After with jitter.
 */
export * from "./protocol.js";
export { Connection, type ConnectionOptions, type ConnectionState, type WebSocketConstructor, type WebSocketLike } from "./connection.js";
export { WorldModel, type Entity, type GameEvent, type Label } from "./world.js";
export { MovePacer } from "./pacer.js";
export { Emitter } from "./emitter.js";
export { GroveClient, ConnectionLost, socketUrl, type ChatLine, type ClientEvents, type ClientError, type ClientOptions, type View } from "./client.js";
export { deviceLogin, backoffMs, LoginRefused, type Login, type LoginOptions } from "./accounts.js";
