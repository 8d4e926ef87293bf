/**
 * Connections that never go away must not keep a session awake (issue 14 §3), against dynalite:
 * connection items carry the table's TTL attribute and an `expiresAt` that readers check
 * themselves (dynalite, like DynamoDB between expiry and deletion, keeps expired items); the
 * idle predicate, `init`'s `connectedClients` and the "last client left" check count only live
 * connections; frames push the expiry forward; broadcast prunes expired and gone connections.
 */
import { DynamoWsTicketStore } from "../../functions/store/dynamo-ws-tickets";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { CONNECTION_INIT_DEADLINE_SECONDS, MAX_CONNECTION_SECONDS } from "../../functions/domain/connection-liveness";
import { broadcast } from "../../functions/services/broadcast";
import { readIdleFacts } from "../../functions/idle/idle-check";
import { evaluateIdle } from "../../functions/idle/idle-predicate";
import type { ClientConnection } from "../../functions/ports/session-items";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { keys, TTL_ATTRIBUTE } from "../../functions/store/table-layout";
import { makeConnectHandler } from "../../functions/ws/handlers/connect";
import { makeDisconnectHandler } from "../../functions/ws/handlers/disconnect";
import { makeMessageHandler } from "../../functions/ws/handlers/message";
import { makeSendInitHandler } from "../../functions/ws/handlers/send-init";
import type { WsDeps } from "../../functions/ws/ws-deps";
import { LocalClientPush } from "../../infra/local/local-client-push";
import { FakeOpenCode } from "../support/fake-opencode";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";

const TOKEN = "sbx_connexpiry_0123456789abcdef";
const TTL_SECONDS = 100;
let h: FlowHarness;
let ws: WsDeps;

beforeAll(async () => {
  h = await startFlowHarness({ provider: new InstantSandboxProvider(), agent: new FakeOpenCode(), env: { CONNECTION_TTL_SECONDS: String(TTL_SECONDS), IDLE_SNAPSHOT_DELAY_SECONDS: "30" } });
  const tokens = new DynamoApiTokenStore(h.table.doc, h.table.tableName);
  await tokens.putToken(TOKEN, { userId: "user-a", orgId: "org-a" }, new Date());
  ws = { ...h.deps, tokens, wsTickets: new DynamoWsTicketStore(h.table.doc, h.table.tableName), transcript: new DynamoTranscriptStore(h.table.doc, h.table.tableName), afterConnect: () => Promise.resolve() };
});
afterAll(async () => h.close());

const now = () => h.deps.now();
const inSeconds = (s: number) => new Date(now().getTime() + s * 1000).toISOString();

async function runningSession(): Promise<string> {
  const s = await h.createSession({ status: "running", sandboxId: "sb-1", lastActivityAt: new Date(0).toISOString(), lastKnownAgentIdleAt: new Date(0).toISOString() });
  return s.id;
}

function connection(sessionId: string, connectionId: string, overrides: Partial<ClientConnection> = {}): ClientConnection {
  return { connectionId, sessionId, userId: "user-a", clientType: "web", connectedAt: now().toISOString(), ready: true, ...overrides };
}

async function rawItem(key: { PK: string; SK: string }): Promise<Record<string, unknown> | undefined> {
  return (await h.table.doc.send(new GetCommand({ TableName: h.table.tableName, Key: key, ConsistentRead: true }))).Item;
}

const epoch = (iso: string) => Math.ceil(Date.parse(iso) / 1000);

async function connectClient(sessionId: string, connectionId: string): Promise<void> {
  const res = await makeConnectHandler(ws)({ requestContext: { connectionId, routeKey: "$connect" }, queryStringParameters: { sessionId, token: TOKEN } });
  expect(res.statusCode).toBe(200);
}

describe("connection items", () => {
  it("carry the table's TTL attribute (epoch seconds of expiresAt) on both the session's item and the lookup", async () => {
    const sessionId = await runningSession();
    const expiresAt = inSeconds(50);
    await h.deps.connections.add(connection(sessionId, "ttl-1", { expiresAt }));
    expect(await rawItem(keys.connection(sessionId, "ttl-1"))).toMatchObject({ expiresAt, [TTL_ATTRIBUTE]: epoch(expiresAt) });
    expect(await rawItem(keys.connectionLookup("ttl-1"))).toMatchObject({ expiresAt, [TTL_ATTRIBUTE]: epoch(expiresAt) });
    // The attribute stays in the table: records read back are the domain shape.
    expect(await h.deps.connections.lookup("ttl-1")).not.toHaveProperty(TTL_ATTRIBUTE);
  });

  it("listLive leaves out expired items, which DynamoDB may not have deleted yet; items without expiresAt live API Gateway's 2 hours", async () => {
    const sessionId = await runningSession();
    await h.deps.connections.add(connection(sessionId, "live", { expiresAt: inSeconds(30) }));
    await h.deps.connections.add(connection(sessionId, "expired", { expiresAt: inSeconds(-1) }));
    await h.deps.connections.add(connection(sessionId, "legacy-fresh"));
    await h.deps.connections.add(connection(sessionId, "legacy-old", { connectedAt: new Date(now().getTime() - (MAX_CONNECTION_SECONDS + 1) * 1000).toISOString() }));
    expect((await h.deps.connections.list(sessionId)).map((c) => c.connectionId).sort()).toEqual(["expired", "legacy-fresh", "legacy-old", "live"]);
    expect((await h.deps.connections.listLive(sessionId, now())).map((c) => c.connectionId).sort()).toEqual(["legacy-fresh", "live"]);
  });

  it("refresh moves the expiry of both items forward, and never re-creates a connection that left", async () => {
    const sessionId = await runningSession();
    await h.deps.connections.add(connection(sessionId, "refresh-1", { expiresAt: inSeconds(5) }));
    const later = new Date(inSeconds(80));
    expect(await h.deps.connections.refresh(sessionId, "refresh-1", later)).toBe(true);
    expect(await rawItem(keys.connection(sessionId, "refresh-1"))).toMatchObject({ expiresAt: later.toISOString(), [TTL_ATTRIBUTE]: epoch(later.toISOString()) });
    expect(await rawItem(keys.connectionLookup("refresh-1"))).toMatchObject({ expiresAt: later.toISOString(), [TTL_ATTRIBUTE]: epoch(later.toISOString()) });
    await h.deps.connections.remove(sessionId, "refresh-1");
    expect(await h.deps.connections.refresh(sessionId, "refresh-1", later)).toBe(false);
    expect(await rawItem(keys.connection(sessionId, "refresh-1"))).toBeUndefined();
    expect(await rawItem(keys.connectionLookup("refresh-1"))).toBeUndefined();
  });

  it("proxy connection items carry the TTL attribute too", async () => {
    const sessionId = await runningSession();
    const expiresAt = inSeconds(120);
    await h.deps.proxies.put({ proxyId: "term-1", sessionId, kind: "terminal", openedAt: now().toISOString(), expiresAt });
    expect(await rawItem(keys.proxy(sessionId, "term-1"))).toMatchObject({ [TTL_ATTRIBUTE]: epoch(expiresAt) });
  });
});

describe("only live connections count", () => {
  it("a connection registered by $connect that never gets its init stops blocking the idle snapshot after the init deadline", async () => {
    const sessionId = await runningSession();
    await connectClient(sessionId, "never-init");
    const [item] = await h.deps.connections.list(sessionId);
    expect(Date.parse(String(item?.expiresAt)) - now().getTime()).toBeLessThanOrEqual(CONNECTION_INIT_DEADLINE_SECONDS * 1000);
    const before = await readIdleFacts(ws, sessionId);
    if (!before) throw new Error("no session");
    expect(before.clients).toBe(1);
    expect(evaluateIdle(before, "inactivity", h.config).reason).toBe("clients_connected");
    h.advance((CONNECTION_INIT_DEADLINE_SECONDS + 1) * 1000);
    const after = await readIdleFacts(ws, sessionId);
    if (!after) throw new Error("no session");
    expect(after.clients).toBe(0);
    expect(evaluateIdle(after, "inactivity", h.config).idle).toBe(true);
  });

  it("init's connectedClients counts live connections only, and marking ready gives the connection the whole TTL", async () => {
    const sessionId = await runningSession();
    await h.deps.connections.add(connection(sessionId, "vanished", { expiresAt: inSeconds(-5) }));
    await h.deps.connections.add(connection(sessionId, "other", { expiresAt: inSeconds(30) }));
    await connectClient(sessionId, "newcomer");
    const from = h.push.sent.length;
    expect(await makeSendInitHandler(ws, { attempts: 1, retryMs: 0 })({ connectionId: "newcomer", sessionId })).toEqual({ sent: true });
    const init = h.push.sent.slice(from).find((s) => s.connectionId === "newcomer" && s.message.type === "init");
    expect(init?.message.data).toMatchObject({ connectedClients: 2 });
    const ready = await h.deps.connections.lookup("newcomer");
    expect(Date.parse(String((await rawItem(keys.connection(sessionId, "newcomer")))?.expiresAt)) - now().getTime()).toBeGreaterThan((TTL_SECONDS - 5) * 1000);
    expect(Date.parse(String(ready?.expiresAt)) - now().getTime()).toBeGreaterThan((TTL_SECONDS - 5) * 1000);
  });

  it("the last live client leaving arms the idle check, whatever expired items remain", async () => {
    const sessionId = await runningSession();
    await h.deps.connections.add(connection(sessionId, "ghost", { expiresAt: inSeconds(-1) }));
    await h.deps.connections.add(connection(sessionId, "leaving", { expiresAt: inSeconds(30) }));
    expect(h.scheduler.pending().some((p) => p.name === `idle-check-${sessionId}`)).toBe(false);
    await makeDisconnectHandler(ws)({ requestContext: { connectionId: "leaving", routeKey: "$disconnect" } });
    expect(h.scheduler.pending().some((p) => p.name === `idle-check-${sessionId}`)).toBe(true);
  });
});

describe("activity keeps a connection live", () => {
  it("a frame moves the expiry forward once half the TTL is gone; earlier frames write nothing", async () => {
    const sessionId = await runningSession();
    const expiresAt = inSeconds(TTL_SECONDS);
    await h.deps.connections.add(connection(sessionId, "chatty", { expiresAt }));
    const message = makeMessageHandler(ws);
    const frame = (body: unknown) => message({ requestContext: { connectionId: "chatty", routeKey: "$default" }, body: JSON.stringify(body) });
    h.advance(10_000);
    await frame({ type: "ping" });
    expect((await h.deps.connections.lookup("chatty"))?.expiresAt).toBe(expiresAt);
    h.advance((TTL_SECONDS / 2) * 1000);
    await frame({ type: "ping" });
    const refreshed = Date.parse(String((await h.deps.connections.lookup("chatty"))?.expiresAt));
    expect(refreshed - now().getTime()).toBeGreaterThan((TTL_SECONDS - 5) * 1000);
    expect((await rawItem(keys.connection(sessionId, "chatty")))?.expiresAt).toBe(new Date(refreshed).toISOString());
    // Invalid frames are activity too.
    h.advance((TTL_SECONDS - 10) * 1000);
    await frame({ type: "dance" });
    expect(Date.parse(String((await h.deps.connections.lookup("chatty"))?.expiresAt)) - now().getTime()).toBeGreaterThan((TTL_SECONDS - 5) * 1000);
    expect((await h.deps.connections.listLive(sessionId, now())).map((c) => c.connectionId)).toEqual(["chatty"]);
  });
});

describe("broadcast prunes", () => {
  it("expired connections (ready or not) and ones the push finds gone; a live connection awaiting its init is skipped, not pruned", async () => {
    const sessionId = await runningSession();
    await h.deps.connections.add(connection(sessionId, "live", { expiresAt: inSeconds(30) }));
    await h.deps.connections.add(connection(sessionId, "expired-ready", { expiresAt: inSeconds(-1) }));
    await h.deps.connections.add(connection(sessionId, "expired-unready", { ready: false, expiresAt: inSeconds(-1) }));
    await h.deps.connections.add(connection(sessionId, "awaiting-init", { ready: false, expiresAt: inSeconds(30) }));
    await h.deps.connections.add(connection(sessionId, "closed", { expiresAt: inSeconds(30) }));
    h.push.gone.add("closed");
    const from = h.push.sent.length;
    expect(await broadcast(h.deps, sessionId, { type: "status", status: "running" })).toBe(1);
    expect(h.push.sent.slice(from).map((s) => s.connectionId)).toEqual(["live"]);
    expect((await h.deps.connections.list(sessionId)).map((c) => c.connectionId).sort()).toEqual(["awaiting-init", "live"]);
    expect(await h.deps.connections.lookup("expired-ready")).toBeNull();
    expect(await h.deps.connections.lookup("closed")).toBeNull();
  });

  it("locally, a socket that is no longer open is gone, so broadcast prunes it", async () => {
    const sessionId = await runningSession();
    const push = new LocalClientPush();
    push.register("half-closed", () => false);
    expect(await push.send("half-closed", { type: "pong" })).toBe("gone");
    await h.deps.connections.add(connection(sessionId, "half-closed", { expiresAt: inSeconds(30) }));
    expect(await broadcast({ ...h.deps, push }, sessionId, { type: "status", status: "running" })).toBe(0);
    expect(await h.deps.connections.list(sessionId)).toEqual([]);
  });
});
