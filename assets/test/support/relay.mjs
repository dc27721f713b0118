// A TCP relay on a port of its own, kept for a whole test, that passes each
// connection to the server of the moment: a page that knows only the
// relay's address comes back to it as to a server restarted in place,
// whatever port the new server took. A server that stops closes its
// connections through the relay; while no server is set, the relay closes
// each connection it accepts, as a port nobody listens on refuses it.
import { connect, createServer } from "node:net";

/** Resolves with the relay's `url`, `to(port)` (null: no server) and `close()`. */
export function startRelay() {
  let target = null;
  const open = new Set();
  const relay = createServer((socket) => {
    if (target === null) return socket.destroy();
    const upstream = connect(target, "127.0.0.1");
    const both = [socket, upstream];
    const close = () => both.forEach((end) => end.destroy());
    for (const end of both) {
      open.add(end);
      end.once("close", () => {
        open.delete(end);
        close();
      });
      end.on("error", close);
    }
    socket.pipe(upstream);
    upstream.pipe(socket);
  });

  return new Promise((resolveRelay, reject) => {
    relay.once("error", reject);
    relay.listen(0, "127.0.0.1", () =>
      resolveRelay({
        url: `http://127.0.0.1:${relay.address().port}/`,
        to(port) {
          target = port;
        },
        close() {
          for (const end of open) end.destroy();
          return new Promise((resolveClose) => relay.close(() => resolveClose()));
        },
      }),
    );
  });
}
