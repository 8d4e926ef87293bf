/**
 * Hostile and broken WebSocket clients against the local runtime (issue 14 §1, §3), over real
 * sockets on 127.0.0.1 only, with bounded loops: an oversized frame, binary frames, upgrades on
 * unknown paths and malformed handshakes, aborted handshakes (partial requests, clients gone
 * while `$connect` runs, sockets closed without a close frame, peers that never answer pings)
 * and a bounded connect flood. Afterwards the process still serves HTTP and WebSocket, `init`
 * counts only the clients really there, and the session still idle-snapshots once the last real
 * client leaves (a short grace keeps it quick).
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { broadcastStatus } from "../../functions/services/broadcast";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, waitFor, type ApiClient } from "../support/local-runtime";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
let port: number;
let sessionId: string;
/** The one real client that stays connected through the hostile part. */
let anchor: TestWsClient;
const clients: TestWsClient[] = [];
/** Short, so that the quiet anchor outlives it many times over: answered pings keep it live. */
const TTL_SECONDS = 8;
const PING_SECONDS = 1;
const rawSockets: net.Socket[] = [];

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: { IDLE_SNAPSHOT_DELAY_SECONDS: "2", RELAY_SCAN_INTERVAL_SECONDS: "0.2", RELAY_LEASE_TTL_SECONDS: "1.5", LOCAL_WS_PING_SECONDS: String(PING_SECONDS), CONNECTION_TTL_SECONDS: String(TTL_SECONDS) },
  }));
  port = Number(new URL(runtime.url).port);
  const res = await api.request("POST", "/v1/sessions", { body: {} });
  expect(res.status).toBe(201);
  sessionId = (res.body as { session: { id: string } }).session.id;
  anchor = await connect();
  await anchor.waitFor(isStatus("running"), 90_000, "running");
});
afterAll(async () => {
  for (const s of rawSockets) s.destroy();
  await Promise.all(clients.map((c) => c.close()));
  await runtime.close();
});

const isStatus = (status: string) => (m: ServerMessage) => m.type === "status" && m.status === status;

async function connect(): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token: runtime.devApiToken });
  clients.push(client);
  return client;
}

/** The close code the server sent (or 1006 when the socket just went). */
function closeCode(client: TestWsClient, timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the server did not close the connection")), timeoutMs);
    client.socket.once("close", (code: number) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

function upgradeRequest(path: string, overrides: Record<string, string | null> = {}): string {
  const headers: Record<string, string | null> = {
    Host: `127.0.0.1:${port}`,
    Upgrade: "websocket",
    Connection: "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
    ...overrides,
  };
  const lines = Object.entries(headers).flatMap(([k, v]) => (v === null ? [] : [`${k}: ${v}`]));
  return `GET ${path} HTTP/1.1\r\n${lines.join("\r\n")}\r\n\r\n`;
}

const wsPath = () => `/ws?${new URLSearchParams({ sessionId, token: runtime.devApiToken }).toString()}`;

/** A raw TCP client on loopback: sends `request`, records what comes back and whether the server closed. */
function rawSocket(request: string): Promise<{ socket: net.Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    rawSockets.push(socket);
    let data = "";
    socket.on("data", (chunk) => {
      data += chunk.toString("latin1");
    });
    socket.on("error", () => undefined);
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    socket.once("connect", () => {
      socket.write(request);
      resolve({ socket, received: () => data, closed });
    });
    socket.once("error", reject);
  });
}

/** Sends `request` and waits (bounded) for the server to answer and close. */
async function exchange(request: string, timeoutMs = 10_000): Promise<string> {
  const raw = await rawSocket(request);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms; got ${JSON.stringify(raw.received())}`)), timeoutMs);
  });
  try {
    await Promise.race([raw.closed, timedOut]);
  } finally {
    clearTimeout(timer);
    raw.socket.destroy();
  }
  return raw.received();
}

/** Completes a real upgrade over a raw socket and then never says anything again (not even pong). */
async function silentPeer(): Promise<{ closed: Promise<void> }> {
  const raw = await rawSocket(upgradeRequest(wsPath()));
  await waitFor("the 101", () => raw.received().includes("\r\n\r\n"), 10_000);
  expect(raw.received()).toMatch(/^HTTP\/1\.1 101 /);
  return { closed: raw.closed };
}

async function storedConnections(): Promise<number> {
  return (await runtime.flowDeps.connections.list(sessionId)).length;
}

/** Waits until every connect, frame and disconnect the server started has been handled. */
async function serverSettled(): Promise<void> {
  await runtime.websocket.settled();
}

async function stillServes(): Promise<void> {
  expect((await api.request("GET", "/v1/health", { token: null })).status).toBe(200);
  anchor.send({ type: "ping" });
  await anchor.next((m) => m.type === "pong", 10_000, "pong on the anchor");
  expect(anchor.closed).toBe(false);
}

describe("hostile clients on the local runtime", () => {
  it("an upgrade on an unknown path is answered 404 and closed; a malformed handshake is a 400 and registers nothing", async () => {
    expect(await exchange(upgradeRequest("/nowhere"))).toMatch(/^HTTP\/1\.1 404 /);
    expect(await exchange(upgradeRequest(`http://[bad${wsPath()}`))).toMatch(/^HTTP\/1\.1 (400|404) /);
    expect(await exchange(upgradeRequest(wsPath(), { "Sec-WebSocket-Key": "short" }))).toMatch(/^HTTP\/1\.1 400 /);
    expect(await exchange(upgradeRequest(wsPath(), { "Sec-WebSocket-Version": null }))).toMatch(/^HTTP\/1\.1 400 /);
    await serverSettled();
    expect(await storedConnections()).toBe(1);
    await stillServes();
  });

  it("an oversized frame closes that connection with 1009; the process and the other clients carry on", async () => {
    const hostile = await connect();
    await hostile.waitFor((m) => m.type === "init", 10_000, "init");
    const closed = closeCode(hostile);
    hostile.socket.send("x".repeat(200 * 1024));
    expect(await closed).toBe(1009);
    await serverSettled();
    await waitFor("the oversized client's item to go", async () => (await storedConnections()) === 1, 10_000);
    await stillServes();
  });

  it("a binary frame gets an error frame and the connection stays usable", async () => {
    const client = await connect();
    await client.waitFor((m) => m.type === "init", 10_000, "init");
    client.socket.send(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x00, 0xff]), { binary: true });
    expect(await client.next((m) => m.type === "error", 10_000, "the error frame")).toMatchObject({ code: "invalid_frame" });
    client.send({ type: "ping" });
    await client.next((m) => m.type === "pong", 10_000, "pong after the binary frame");
    expect(client.closed).toBe(false);
    await client.close();
    await serverSettled();
    expect(await storedConnections()).toBe(1);
  });

  it("a peer that stops answering pings is dropped and its connection item removed", async () => {
    // The 101 came back, so `$connect` registered it.
    const peer = await silentPeer();
    await peer.closed;
    // The server's own close handling may trail the peer seeing its socket close.
    await waitFor("the silent peer's item to go", async () => (await storedConnections()) === 1, 10_000);
    await serverSettled();
    expect(await storedConnections()).toBe(1);
    expect(runtime.websocket.sockets()).toBe(1);
  });

  it("a quiet client that answers pings outlives the connection TTL: it still counts and still gets pushes", async () => {
    const quiet = await connect();
    await quiet.waitFor((m) => m.type === "init", 10_000, "init");
    // Waits on the server's pings until one and a half TTLs have passed without a frame from the client.
    await new Promise<void>((resolve) => {
      let pings = 0;
      quiet.socket.on("ping", () => {
        if (++pings === Math.ceil((TTL_SECONDS * 1.5) / PING_SECONDS)) resolve();
      });
    });
    const live = await runtime.flowDeps.connections.listLive(sessionId, new Date());
    expect(live).toHaveLength(2);
    // Its expiry moved with its pongs: the server refreshes the item once half a TTL has passed
    // since the last refresh, so the landed expiry is at least about TTL/2 ahead (less the refresh
    // the pong that just came may still be writing: checking TTL/2 ahead raced that write on a
    // loaded CI machine). A quarter TTL ahead holds whichever refresh landed last.
    expect(await runtime.flowDeps.connections.listLive(sessionId, new Date(Date.now() + (TTL_SECONDS / 4) * 1000))).toHaveLength(2);
    // A status push (as a flow sends) reaches it: broadcast did not prune it.
    expect(await broadcastStatus(runtime.flowDeps, sessionId, "running", "still there?")).toBe(2);
    await quiet.next((m) => m.type === "status" && m.message === "still there?", 10_000, "the pushed status");
    await quiet.close();
    await waitFor("the quiet client's item to go", async () => (await storedConnections()) === 1, 10_000);
  });

  it("a bounded connect flood with aborted handshakes leaves only the real clients; init counts them truly", async () => {
    // 200 connects, 50 of them aborted four ways, 25 at a time.
    const kinds: (() => Promise<unknown>)[] = [];
    for (let i = 0; i < 150; i++) {
      kinds.push(async () => {
        const c = await connect();
        await c.waitFor((m) => m.type === "init", 30_000, "init");
        await c.close();
      });
    }
    for (let i = 0; i < 15; i++) {
      // A partial upgrade request, then gone.
      kinds.push(async () => (await rawSocket(upgradeRequest(wsPath()).slice(0, 60))).socket.destroy());
      // A whole upgrade request, gone while `$connect` runs.
      kinds.push(async () => (await rawSocket(upgradeRequest(wsPath()))).socket.destroy());
    }
    for (let i = 0; i < 10; i++) {
      // Upgraded, then the socket closes without a close frame.
      kinds.push(async () => {
        const c = await connect();
        c.socket.terminate();
      });
      // Upgraded, then silent: never a pong.
      kinds.push(async () => (await silentPeer()).closed);
    }
    expect(kinds).toHaveLength(200);
    for (let i = 0; i < kinds.length; i += 25) await Promise.all(kinds.slice(i, i + 25).map((k) => k()));
    await waitFor("every flooded connection to be gone", async () => (await storedConnections()) === 1 && runtime.websocket.sockets() === 1, 30_000);
    await serverSettled();
    expect(await storedConnections()).toBe(1);
    expect(runtime.websocket.sockets()).toBe(1);
    await stillServes();

    const another = await connect();
    const init = await another.waitFor((m) => m.type === "init", 10_000, "init");
    expect(init.data).toMatchObject({ connectedClients: 2 });
    await another.close();
    await serverSettled();
    expect(await storedConnections()).toBe(1);
  });

  it("afterwards the session still idle-snapshots once the last real client leaves", async () => {
    await waitFor("the relay to watch the session", () => runtime.relay().heldSessions().includes(sessionId), 30_000);
    await anchor.close();
    const paused = await waitFor(
      "the idle snapshot",
      async () => {
        const s = ((await api.request("GET", `/v1/sessions/${sessionId}`)).body as { session: { status: string; pauseReason: string | null } }).session;
        return s.status === "paused" ? s : null;
      },
      60_000,
    );
    expect(paused).toMatchObject({ status: "paused", pauseReason: "inactivity" });
    expect(await storedConnections()).toBe(0);
  });
});
