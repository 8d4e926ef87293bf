/**
 * Deployment safety caps (issue 14 §7) through the local runtime over real sockets: open
 * sessions per org (ORG_MAX_OPEN_SESSIONS) and queued prompts per session
 * (MAX_QUEUED_PROMPTS_PER_SESSION). Over a cap is a 429 `quota_exceeded` naming the limit and
 * its value, and nothing is stored; another org is not affected; stopping a session frees its place.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { apiClient, startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let orgA: ApiClient;
let orgB: ApiClient;
let orgQueue: ApiClient;

interface ErrorBody {
  error: { code: string; message: string };
}

beforeAll(async () => {
  ({ runtime } = await startRuntimeForTest({ env: { ORG_MAX_OPEN_SESSIONS: "3", MAX_QUEUED_PROMPTS_PER_SESSION: "2" } }));
  orgA = apiClient(runtime.url, await runtime.addApiToken({ userId: "alice", orgId: "org-limit-a" }));
  orgB = apiClient(runtime.url, await runtime.addApiToken({ userId: "bob", orgId: "org-limit-b" }));
  orgQueue = apiClient(runtime.url, await runtime.addApiToken({ userId: "carol", orgId: "org-limit-q" }));
});
afterAll(async () => runtime.close());

async function create(api: ApiClient, title: string): Promise<{ status: number; id?: string; body: unknown }> {
  const res = await api.request("POST", "/v1/sessions", { body: { title } });
  return { status: res.status, body: res.body, ...(res.status === 201 ? { id: (res.body as { session: { id: string } }).session.id } : {}) };
}

async function listIds(api: ApiClient): Promise<string[]> {
  const res = await api.request("GET", "/v1/sessions?limit=100");
  return (res.body as { items: { id: string }[] }).items.map((i) => i.id);
}

describe("open sessions per org", () => {
  it("the org's 4th open session is a 429 quota_exceeded naming the limit; nothing is stored; stopping one frees a place", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await create(orgA, `s${i}`);
      expect(res.status).toBe(201);
      ids.push(res.id ?? "");
    }
    const before = await listIds(orgA);
    const over = await create(orgA, "one too many");
    expect(over.status).toBe(429);
    const err = (over.body as ErrorBody).error;
    expect(err.code).toBe("quota_exceeded");
    expect(err.message).toContain("open sessions");
    expect(err.message).toContain("limit is 3");
    expect(await listIds(orgA)).toEqual(before);

    // Per org: another org still creates.
    expect((await create(orgB, "other org")).status).toBe(201);

    // Stopping a session (the public route and its flow) frees its place.
    const stopped = ids[0] ?? "";
    expect((await orgA.request("DELETE", `/v1/sessions/${stopped}`)).status).toBe(202);
    await waitFor("the session to stop", async () => (await storedSession(runtime, stopped)).status === "stopped");
    expect((await create(orgA, "after a stop")).status).toBe(201);
    expect((await create(orgA, "over again")).status).toBe(429);
  });
});

describe("queued prompts per session", () => {
  it("the 3rd waiting prompt is a 429 quota_exceeded naming the limit, and is not stored", async () => {
    const { id } = await create(orgQueue, "busy");
    const sessionId = id ?? "";
    // A lifecycle flow holds the session: prompts wait in the queue (delivery `deferred`).
    await runtime.deps.sessions.acquireLease(sessionId, "test-holder", new Date(), 300);
    for (const content of ["one", "two"]) {
      const res = await orgQueue.request("POST", `/v1/sessions/${sessionId}/prompts`, { body: { content } });
      expect(res.status).toBe(202);
      expect((res.body as { delivery: string }).delivery).toBe("deferred");
    }
    const over = await orgQueue.request("POST", `/v1/sessions/${sessionId}/prompts`, { body: { content: "three" } });
    expect(over.status).toBe(429);
    const err = (over.body as ErrorBody).error;
    expect(err.code).toBe("quota_exceeded");
    expect(err.message).toContain("queued prompts");
    expect(err.message).toContain("limit is 2");
    const queued = await runtime.deps.prompts.list(sessionId);
    expect(queued.map((p) => p.content)).toEqual(["one", "two"]);
  });
});
