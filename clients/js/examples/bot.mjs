// A bot that wanders: node examples/bot.mjs http://127.0.0.1:4000/ [steps]
import WebSocket from "ws";
import { GroveClient, directions } from "@grove/client";

const [url = "http://127.0.0.1:4000/", steps = "50"] = process.argv.slice(2);
const client = new GroveClient({ url, name: "wanderbot", WebSocket });
client.on("error", (error) => console.warn(`server says ${error.code}: ${error.message}`));

const me = await client.connect();
console.log(`joined as ${me.id} at ${me.x},${me.y}`);
let heading = "e";
let walked = 0;
for (let step = 0; step < Number(steps); step++) {
  const { result } = await client.move(heading);
  if (result === "ok") walked++;
  else heading = directions[Math.floor(Math.random() * directions.length)]; // bumped: turn
}
const others = client.view().entities.filter((entity) => entity.id !== me.id);
console.log(`walked ${walked} of ${steps} steps to ${client.world.x},${client.world.y}; ${others.length} others in view`);
client.close();
