/**
 * API token lifetimes and WebSocket connect tickets over real sockets on the local runtime
 * (issue 14 item 5, API.md v1.1 "WebSocket connect tickets"):
 * - an expired or revoked API token is a 401 on HTTP and on WebSocket connect;
 * - revoking a token closes the WebSocket connections it opened (the revoke command's path,
 *   in process: runtime.revokeApiToken), and a connection whose token expired is refused at its
 *   next frame and closed;
 * - a ticket connects once; a replay, an expired ticket, a ticket for another session and a
 *   ticket whose API token was revoked since are refused; another org cannot mint one.
 * The sandboxes are in-memory (InstantSandboxProvider): only the edge is under test here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_PRINCIPAL } from "../../infra/local/runtime";
import type { LocalRuntime } from "../../infra/local/runtime";
import { revokeApiToken } from "../../functions/api-tokens/revoke-api-token";
import { apiTokenId, hashToken, type DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { newWsTicket } from "../../functions/domain/ids";
import { makeConnectHandler } from "../../functions/ws/handlers/connect";
import type { WsDeps } from "../../functions/ws/ws-deps";
import { InstantSandboxProvider } from "../support/instant-provider";
import { startRuntimeForTest, waitFor, type ApiClient } from "../support/local-runtime";
import { TestWsClient } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
let otherOrgToken: string;
const clients: TestWsClient[] = [];

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ provider: async () => new InstantSandboxProvider({ type: "local" }) }));
  otherOrgToken = await runtime.addApiToken({ userId: "mallory", orgId: "org-other" });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime.close();
});

async function createSession(token = runtime.devApiToken): Promise<string> {
  const res = await api.request("POST", "/v1/sessions", { body: {}, token });
  expect(res.status).toBe(201);
  return (res.body as { session: { id: string } }).session.id;
}

async function connect(query: Record<string, string>): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, query);
  clients.push(client);
  await client.waitFor((m) => m.type === "init", 10_000, "init");
  return client;
}

/** Resolves when the server closed the socket; fails after 10 s. */
function closed(client: TestWsClient): Promise<void> {
  if (client.closed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out waiting for the socket to close")), 10_000);
    client.socket.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function mintTicket(sessionId: string, token = runtime.devApiToken): Promise<{ status: number; ticket: string; expiresAt: string; body: unknown }> {
  const res = await api.request("POST", `/v1/sessions/${sessionId}/ws-ticket`, { token });
  const body = res.body as { ticket?: string; expiresAt?: string } | undefined;
  return { status: res.status, ticket: body?.ticket ?? "", expiresAt: body?.expiresAt ?? "", body: res.body };
}

describe("API token expiry", () => {
  it("an expired token is a 401 on HTTP and on WebSocket connect; one not yet expired works", async () => {
    const id = await createSession();
    const expired = await runtime.addApiToken(DEV_PRINCIPAL, undefined, { expiresAt: new Date(Date.now() - 1000) });
    const valid = await runtime.addApiToken(DEV_PRINCIPAL, undefined, { expiresAt: new Date(Date.now() + 3_600_000) });
    const refused = await api.request("GET", `/v1/sessions/${id}`, { token: expired });
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({ error: { code: "unauthorized", message: "invalid, expired or revoked API token" } });
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, token: expired })).rejects.toThrow("refused: 401");
    expect((await api.request("GET", `/v1/sessions/${id}`, { token: valid })).status).toBe(200);
    await connect({ sessionId: id, token: valid });
  });

  it("a connection whose token expires is refused at its next frame and closed", async () => {
    const id = await createSession();
    const shortLived = await runtime.addApiToken(DEV_PRINCIPAL, undefined, { expiresAt: new Date(Date.now() + 1500) });
    const client = await connect({ sessionId: id, token: shortLived });
    client.send({ type: "heartbeat" });
    client.send({ type: "ping" });
    await client.waitFor((m) => m.type === "pong", 10_000, "pong");
    expect(client.received.filter((m) => m.type === "error")).toEqual([]);
    // Heartbeats until the token has expired: the first frame after that is refused.
    const refusal = await waitFor("a refused frame", async () => {
      if (client.closed) return client.received.find((m) => m.type === "error");
      client.send({ type: "heartbeat" });
      return client.received.find((m) => m.type === "error");
    }, 20_000);
    expect(refusal).toMatchObject({ type: "error", code: "unauthorized", message: expect.stringContaining("has expired") });
    await closed(client);
    expect(await runtime.flowDeps.connections.list(id)).toEqual([]);
  });
});

describe("API token revocation", () => {
  it("revoking a token closes its open WebSocket connections and makes it a 401 everywhere; other tokens' connections stay", async () => {
    const id = await createSession();
    const doomed = await runtime.addApiToken({ userId: "bob", orgId: DEV_PRINCIPAL.orgId });
    const first = await connect({ sessionId: id, token: doomed });
    const second = await connect({ sessionId: id, token: doomed });
    const bystander = await connect({ sessionId: id, token: runtime.devApiToken });
    expect((await api.request("GET", `/v1/sessions/${id}`, { token: doomed })).status).toBe(200);

    const tokenId = apiTokenId(hashToken(doomed));
    const report = await runtime.revokeApiToken(tokenId);
    expect(report.token).toMatchObject({ tokenId, userId: "bob", orgId: DEV_PRINCIPAL.orgId, revokedAt: expect.any(String) });
    expect(report.closed).toHaveLength(2);
    await Promise.all([closed(first), closed(second)]);

    expect((await api.request("GET", `/v1/sessions/${id}`, { token: doomed })).status).toBe(401);
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, token: doomed })).rejects.toThrow("refused: 401");
    // The development token's connection is untouched and still served.
    bystander.send({ type: "ping" });
    await bystander.next((m) => m.type === "pong", 10_000, "pong on the bystander");
    expect(bystander.closed).toBe(false);
    await waitFor("the revoked connections to be forgotten", async () => (await runtime.flowDeps.connections.list(id)).length === 1, 10_000);
  });

  it("revokes by a unique prefix of the id (8 hex characters), and by the token itself; twice is harmless", async () => {
    const byPrefix = await runtime.addApiToken({ userId: "carol", orgId: DEV_PRINCIPAL.orgId });
    const prefix = apiTokenId(hashToken(byPrefix)).slice(0, 12);
    expect((await runtime.revokeApiToken(prefix)).token.userId).toBe("carol");
    expect((await api.request("GET", "/v1/sessions", { token: byPrefix })).status).toBe(401);
    const byToken = await runtime.addApiToken({ userId: "dave", orgId: DEV_PRINCIPAL.orgId });
    const first = await runtime.revokeApiToken(byToken);
    const again = await runtime.revokeApiToken(byToken);
    expect(again.token.revokedAt).toBe(first.token.revokedAt);
    expect((await api.request("GET", "/v1/sessions", { token: byToken })).status).toBe(401);
    await expect(runtime.revokeApiToken("tok_ffffffffffffffffffff")).rejects.toThrow("no API token");
    await expect(runtime.revokeApiToken("nope")).rejects.toThrow("token: expected a token id");
  });

  it("a revoke landing while a connect registers leaves no live connection (connect re-checks the token)", async () => {
    const id = await createSession();
    const token = await runtime.addApiToken({ userId: "gail", orgId: DEV_PRINCIPAL.orgId });
    const store = runtime.wsDeps.tokens as DynamoApiTokenStore;
    // The revoke runs after the token was checked and the connection tracked, before it is registered.
    const tokens: WsDeps["tokens"] = {
      resolveToken: (t, at) => store.resolveToken(t, at),
      putToken: (t, p, at, o) => store.putToken(t, p, at, o),
      resolveTokenHash: (h, at) => store.resolveTokenHash(h, at),
      untrackConnection: (tid, cid) => store.untrackConnection(tid, cid),
      trackConnection: async (tid, c, at) => {
        await store.trackConnection(tid, c, at);
        await revokeApiToken({ tokens: store, push: runtime.push }, tid, new Date());
      },
    };
    const connect = makeConnectHandler({ ...runtime.wsDeps, tokens });
    const result = await connect({ requestContext: { connectionId: "conn-race=", routeKey: "$connect" }, queryStringParameters: { sessionId: id, token } });
    expect(result.statusCode).toBe(401);
    expect(await runtime.flowDeps.connections.lookup("conn-race=")).toBeNull();
    expect(await runtime.flowDeps.connections.list(id)).toEqual([]);
  });

  it("a connection the revoke could not close is refused at its next frame", async () => {
    const id = await createSession();
    const token = await runtime.addApiToken({ userId: "erin", orgId: DEV_PRINCIPAL.orgId });
    const client = await connect({ sessionId: id, token });
    // The revoke command without a management endpoint: the connection is only marked.
    const tokens = runtime.wsDeps.tokens as DynamoApiTokenStore;
    const report = await revokeApiToken({ tokens, push: null }, apiTokenId(hashToken(token)), new Date());
    expect(report.marked).toHaveLength(1);
    expect(client.closed).toBe(false);
    client.send({ type: "heartbeat" });
    const refusal = await client.waitFor((m) => m.type === "error", 10_000, "the refusal");
    expect(refusal).toMatchObject({ code: "unauthorized", message: expect.stringContaining("revoked") });
    await closed(client);
  });
});

describe("WebSocket connect tickets (API.md v1.1)", () => {
  it("a ticket connects once, bound to its session; a replay is refused", async () => {
    const id = await createSession();
    const minted = await mintTicket(id);
    expect(minted.status).toBe(201);
    expect(minted.ticket).toMatch(/^wst_[A-Za-z0-9_-]{43}$/);
    const lifetime = Date.parse(minted.expiresAt) - Date.now();
    expect(lifetime).toBeGreaterThan(0);
    expect(lifetime).toBeLessThanOrEqual(60_000);
    const client = await connect({ sessionId: id, ticket: minted.ticket });
    expect(client.received[0]).toMatchObject({ type: "init", session: { id } });
    const [connection] = await runtime.flowDeps.connections.list(id);
    expect(connection).toMatchObject({ userId: DEV_PRINCIPAL.userId, tokenId: apiTokenId(hashToken(runtime.devApiToken)) });
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, ticket: minted.ticket })).rejects.toThrow("refused: 401");
    // The ticket is never stored as such: only its SHA-256 keys the item.
    const raw = JSON.stringify(await runtime.deps.sessions.getSession(id));
    expect(raw).not.toContain(minted.ticket);
  });

  it("refuses an expired ticket, an unknown one, and both token and ticket at once", async () => {
    const id = await createSession();
    const ticket = newWsTicket();
    await runtime.deps.wsTickets.issue(
      ticket,
      { sessionId: id, userId: DEV_PRINCIPAL.userId, orgId: DEV_PRINCIPAL.orgId, role: "admin", tokenHash: hashToken(runtime.devApiToken), expiresAt: new Date(Date.now() - 1000).toISOString() },
      new Date(Date.now() - 61_000),
    );
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, ticket })).rejects.toThrow("refused: 401");
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, ticket: newWsTicket() })).rejects.toThrow("refused: 401");
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, ticket: "not-a-ticket" })).rejects.toThrow("refused: 401");
    const fresh = await mintTicket(id);
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, ticket: fresh.ticket, token: runtime.devApiToken })).rejects.toThrow("refused: 400");
    expect(await runtime.flowDeps.connections.list(id)).toEqual([]);
  });

  it("a ticket minted for one session opens no other, and is used up by trying", async () => {
    const [a, b] = [await createSession(), await createSession()];
    const minted = await mintTicket(a);
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: b, ticket: minted.ticket })).rejects.toThrow("refused: 401");
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: a, ticket: minted.ticket })).rejects.toThrow("refused: 401");
    expect(await runtime.flowDeps.connections.list(b)).toEqual([]);
  });

  it("another org cannot mint one (403), an unknown session is 404, no token is 401, a stopped session 409", async () => {
    const id = await createSession();
    expect((await mintTicket(id, otherOrgToken)).status).toBe(403);
    expect((await mintTicket("ses_00000000000000000000000000")).status).toBe(404);
    const anonymous = await api.request("POST", `/v1/sessions/${id}/ws-ticket`, { token: null });
    expect(anonymous.status).toBe(401);
    const stopped = await createSession();
    expect((await api.request("DELETE", `/v1/sessions/${stopped}`)).status).toBe(202);
    await waitFor("the session to stop", async () => (await runtime.deps.sessions.getSession(stopped))?.status === "stopped", 20_000);
    expect((await mintTicket(stopped)).status).toBe(409);
  });

  it("a ticket whose API token was revoked since opens nothing, and revoking closes ticket connections too", async () => {
    const id = await createSession();
    const token = await runtime.addApiToken({ userId: "frank", orgId: DEV_PRINCIPAL.orgId });
    const unused = await mintTicket(id, token);
    const used = await mintTicket(id, token);
    const client = await connect({ sessionId: id, ticket: used.ticket });
    await runtime.revokeApiToken(token);
    await closed(client);
    await expect(TestWsClient.connect(runtime.wsUrl, { sessionId: id, ticket: unused.ticket })).rejects.toThrow("refused: 401");
  });

  it("a ticket never outlives the API token that minted it", async () => {
    const id = await createSession();
    const tokenExpiry = new Date(Date.now() + 20_000);
    const token = await runtime.addApiToken(DEV_PRINCIPAL, undefined, { expiresAt: tokenExpiry });
    const minted = await mintTicket(id, token);
    expect(minted.status).toBe(201);
    expect(minted.expiresAt).toBe(tokenExpiry.toISOString());
  });
});
