/**
 * The local WebSocket server's connection bookkeeping (issue 14 §1, §3) over real sockets on
 * 127.0.0.1, with the real handlers on dynalite: `$disconnect` runs exactly once for every
 * connection `$connect` registered, however the socket goes (a clean close, a close without a
 * close frame, a client gone while `$connect` still runs, a peer dropped for not answering
 * pings), and never for a refused or malformed upgrade.
 */
import { DynamoWsTicketStore } from "../../functions/store/dynamo-ws-tickets";
import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import type { WsDeps } from "../../functions/ws/ws-deps";
import { LocalClientPush } from "../../infra/local/local-client-push";
import { attachLocalWsServer, type LocalWsServer } from "../../infra/local/local-ws-server";
import { FakeOpenCode } from "../support/fake-opencode";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { waitFor } from "../support/local-runtime";

const TOKEN = "sbx_localws_0123456789abcdef";
let h: FlowHarness;
let server: Server;
let wsServer: LocalWsServer;
let port: number;
let sessionId: string;
/** Connection ids `$connect` registered, in order. */
const registered: string[] = [];
/** `$disconnect` runs per connection id (the disconnect handler is the only caller of `lookup` here: no test sends frames). */
const disconnects = new Map<string, number>();
/** While set, `$connect` waits for it before touching activity (a client can leave meanwhile). */
let connectGate: { reached: () => void; release: Promise<void> } | null = null;

beforeAll(async () => {
  h = await startFlowHarness({ provider: new InstantSandboxProvider(), agent: new FakeOpenCode(), env: { LOCAL_WS_PING_SECONDS: "0.5" } });
  const tokens = new DynamoApiTokenStore(h.table.doc, h.table.tableName);
  await tokens.putToken(TOKEN, { userId: "user-a", orgId: "org-a" }, new Date());
  sessionId = (await h.createSession({ status: "running", sandboxId: "sb-1" })).id;
  const registry = h.deps.connections;
  const connections: WsDeps["connections"] = Object.assign(Object.create(registry) as typeof registry, {
    add: async (c: Parameters<typeof registry.add>[0]) => {
      registered.push(c.connectionId);
      await registry.add(c);
    },
    lookup: (connectionId: string) => {
      disconnects.set(connectionId, (disconnects.get(connectionId) ?? 0) + 1);
      return registry.lookup(connectionId);
    },
  });
  const sessions: WsDeps["sessions"] = Object.assign(Object.create(h.deps.sessions) as typeof h.deps.sessions, {
    touchActivity: async (id: string, now: Date) => {
      const gate = connectGate;
      if (gate) {
        gate.reached();
        await gate.release;
      }
      await h.deps.sessions.touchActivity(id, now);
    },
  });
  const push = new LocalClientPush();
  const deps: WsDeps = { ...h.deps, connections, sessions, push, tokens, wsTickets: new DynamoWsTicketStore(h.table.doc, h.table.tableName), transcript: new DynamoTranscriptStore(h.table.doc, h.table.tableName), afterConnect: () => Promise.resolve() };
  server = createServer((_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  port = (server.address() as AddressInfo).port;
  wsServer = attachLocalWsServer(server, deps, push);
});
afterAll(async () => {
  await wsServer.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await h.close();
});

const url = () => `ws://127.0.0.1:${port}/ws?${new URLSearchParams({ sessionId, token: TOKEN }).toString()}`;

function open(): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url());
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

function upgradeRequest(path: string): string {
  return `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
}

/** Waits for the server to have handled everything, then checks the connection ran `$disconnect` once and left nothing. */
async function expectDisconnectedOnce(connectionId: string | undefined): Promise<void> {
  if (!connectionId) throw new Error("no connection was registered");
  await waitFor(`the disconnect of ${connectionId}`, () => (disconnects.get(connectionId) ?? 0) > 0, 10_000);
  await wsServer.settled();
  expect(disconnects.get(connectionId)).toBe(1);
  expect(await h.deps.connections.lookup(connectionId)).toBeNull();
  expect(await h.deps.connections.list(sessionId)).toEqual([]);
}

describe("$disconnect runs exactly once per registered connection", () => {
  it("a clean close", async () => {
    const ws = await open();
    const id = registered.at(-1);
    await new Promise<void>((resolve) => {
      ws.once("close", () => resolve());
      ws.close();
    });
    await expectDisconnectedOnce(id);
  });

  it("a socket closed without a close frame", async () => {
    const ws = await open();
    const id = registered.at(-1);
    ws.terminate();
    await expectDisconnectedOnce(id);
  });

  it("a client gone while $connect still runs", async () => {
    let reached: () => void = () => undefined;
    const atGate = new Promise<void>((resolve) => (reached = resolve));
    let release: () => void = () => undefined;
    connectGate = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    const socket = net.connect(port, "127.0.0.1", () => socket.write(upgradeRequest(new URL(url()).pathname + new URL(url()).search)));
    socket.on("error", () => undefined);
    await atGate;
    const id = registered.at(-1);
    await new Promise<void>((resolve) => {
      socket.once("close", () => resolve());
      socket.destroy();
    });
    connectGate = null;
    release();
    await expectDisconnectedOnce(id);
  });

  it("a peer that stops answering pings", async () => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(upgradeRequest(new URL(url()).pathname + new URL(url()).search)));
    socket.on("error", () => undefined);
    let received = "";
    socket.on("data", (chunk) => (received += chunk.toString("latin1")));
    await new Promise<void>((resolve) => socket.once("close", () => resolve()));
    expect(received).toMatch(/^HTTP\/1\.1 101 /);
    await expectDisconnectedOnce(registered.at(-1));
  });

  it("never for a refused connect or an upgrade on another path", async () => {
    const before = registered.length;
    const refused = new WebSocket(`ws://127.0.0.1:${port}/ws?${new URLSearchParams({ sessionId, token: "sbx_wrong_wrong_wrong_wrong" }).toString()}`);
    const status = await new Promise<number>((resolve) => refused.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0)));
    expect(status).toBe(401);
    const elsewhere = new WebSocket(`ws://127.0.0.1:${port}/elsewhere`);
    const elsewhereStatus = await new Promise<number>((resolve) => elsewhere.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0)));
    expect(elsewhereStatus).toBe(404);
    await wsServer.settled();
    expect(registered.length).toBe(before);
    expect(wsServer.sockets()).toBe(0);
  });
});
