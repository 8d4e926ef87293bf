/**
 * Child process of bench section 5 (relay.ts): one fake OpenCode HTTP server standing in for many
 * sandboxes, each under its own path prefix (`/sb/<n>`, agent session `ses_bench<n>`), in its own
 * process as the real OpenCode servers are, so the relay process's memory and event loop measure
 * the relay alone.
 *
 * Per sandbox: `GET /event` holds an SSE stream (`server.connected` first, then `server.heartbeat`
 * every 10 s, as OpenCode does), `GET /session/status` answers `{}` (idle), `GET /session/<id>/message`
 * answers `[]`. Over IPC: `clock` (this process's clock, to estimate the offset), `stats`, and `load`,
 * which emits assistant turns (busy, message.updated, part.updated, text deltas, completed, idle)
 * across random sandboxes; every delta's text carries its emit time (`t=<ms>;`, this process's clock).
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ChildCommand =
  | { cmd: "clock"; id: number }
  | { cmd: "stats" }
  | { cmd: "load"; sandboxes: number; turns: number; turnsPerSecond: number; deltasPerTurn: number; deltaGapMs: number };

export type ChildReply =
  | { cmd: "ready"; port: number }
  | { cmd: "clock"; id: number; at: number }
  | { cmd: "stats"; streams: number; rss: number; cpuMs: number }
  | { cmd: "loadDone"; turns: number; deltas: number; noStream: number; lateStartP99Ms: number };

const HEARTBEAT_MS = 10_000;
const now = () => performance.timeOrigin + performance.now();
const streams = new Map<number, Set<ServerResponse>>();
let seq = 0;

function frame(type: string, properties: Record<string, unknown>): string {
  return `data: ${JSON.stringify({ id: `evt_bench${(++seq).toString(36).padStart(8, "0")}`, type, properties })}\n\n`;
}

function json(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer((req, res) => {
  const match = /^\/sb\/(\d+)(\/[^?]*)/.exec(req.url ?? "");
  const sandbox = Number(match?.[1]);
  const path = match?.[2] ?? "";
  const agentSessionId = `ses_bench${sandbox}`;
  if (req.method === "GET" && path === "/event") {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    res.write(frame("server.connected", {}));
    const open = streams.get(sandbox) ?? new Set<ServerResponse>();
    streams.set(sandbox, open);
    open.add(res);
    const heartbeat = setInterval(() => res.write(frame("server.heartbeat", {})), HEARTBEAT_MS);
    res.on("close", () => {
      clearInterval(heartbeat);
      open.delete(res);
    });
    return;
  }
  if (req.method === "GET" && path === "/session/status") return json(res, {});
  if (req.method === "GET" && path === `/session/${agentSessionId}/message`) return json(res, []);
  if (req.method === "GET" && path === `/session/${agentSessionId}`) return json(res, { id: agentSessionId });
  if (req.method === "POST" && path === "/session") return json(res, { id: agentSessionId });
  res.writeHead(404, { "content-type": "application/json" });
  res.end(JSON.stringify({ name: "NotFoundError" }));
});

function send(reply: ChildReply): void {
  process.send?.(reply);
}

function emit(sandbox: number, type: string, properties: Record<string, unknown>): boolean {
  const open = streams.get(sandbox);
  if (!open || open.size === 0) return false;
  const text = frame(type, properties);
  for (const res of open) res.write(text);
  return true;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One assistant turn on one sandbox, shaped like test/fixtures/opencode/sse-echo-turn.txt (trimmed). */
async function turn(sandbox: number, index: number, deltas: number, gapMs: number): Promise<{ deltas: number; streamed: boolean }> {
  const sessionID = `ses_bench${sandbox}`;
  const messageID = `msg_bench${index.toString().padStart(6, "0")}`;
  const partID = `prt_bench${index.toString().padStart(6, "0")}`;
  const created = Date.now();
  const info = { id: messageID, role: "assistant", sessionID, time: { created } };
  if (!emit(sandbox, "session.status", { sessionID, status: { type: "busy" } })) return { deltas: 0, streamed: false };
  emit(sandbox, "message.updated", { sessionID, info });
  emit(sandbox, "message.part.updated", { sessionID, part: { id: partID, messageID, sessionID, type: "text", text: "" } });
  let sent = 0;
  for (let i = 0; i < deltas; i++) {
    await sleep(gapMs);
    if (emit(sandbox, "message.part.delta", { sessionID, messageID, partID, field: "text", delta: `t=${now().toFixed(3)};` })) sent++;
  }
  await sleep(gapMs);
  emit(sandbox, "message.updated", { sessionID, info: { ...info, time: { created, completed: Date.now() } } });
  emit(sandbox, "session.status", { sessionID, status: { type: "idle" } });
  emit(sandbox, "session.idle", { sessionID });
  return { deltas: sent, streamed: true };
}

async function load(command: Extract<ChildCommand, { cmd: "load" }>): Promise<void> {
  const started = performance.now();
  const running: Promise<{ deltas: number; streamed: boolean }>[] = [];
  const lateStarts: number[] = [];
  // A sandbox already in a turn is not given a second one at the same time (one prompt at a time).
  const busy = new Set<number>();
  for (let i = 0; i < command.turns; i++) {
    const due = started + (i * 1000) / command.turnsPerSecond;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    lateStarts.push(Math.max(0, performance.now() - due));
    let sandbox = Math.floor(Math.random() * command.sandboxes);
    while (busy.has(sandbox)) sandbox = Math.floor(Math.random() * command.sandboxes);
    busy.add(sandbox);
    running.push(turn(sandbox, i, command.deltasPerTurn, command.deltaGapMs).finally(() => busy.delete(sandbox)));
  }
  const results = await Promise.all(running);
  lateStarts.sort((a, b) => a - b);
  send({
    cmd: "loadDone",
    turns: results.filter((r) => r.streamed).length,
    deltas: results.reduce((a, r) => a + r.deltas, 0),
    noStream: results.filter((r) => !r.streamed).length,
    lateStartP99Ms: lateStarts[Math.max(0, Math.ceil(lateStarts.length * 0.99) - 1)] ?? 0,
  });
}

process.on("message", (message: ChildCommand) => {
  if (message.cmd === "clock") send({ cmd: "clock", id: message.id, at: now() });
  else if (message.cmd === "stats") {
    const cpu = process.cpuUsage();
    send({ cmd: "stats", streams: [...streams.values()].reduce((a, s) => a + s.size, 0), rss: process.memoryUsage().rss, cpuMs: (cpu.user + cpu.system) / 1000 });
  }
  else if (message.cmd === "load") void load(message);
});
// The parent went away (finished or crashed): do not linger.
process.on("disconnect", () => {
  server.closeAllConnections();
  server.close();
  process.exit(0);
});

server.listen(0, "127.0.0.1", () => send({ cmd: "ready", port: (server.address() as AddressInfo).port }));
