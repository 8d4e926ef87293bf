import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let otherOrgToken: string;

interface SessionBody {
  session: Record<string, unknown> & { id: string; status: string; lastActivityAt: string };
}

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ env: { SANDBOX_PROVIDERS: "local,e2b" } }));
  otherOrgToken = await runtime.addApiToken({ userId: "mallory", orgId: "org-other" });
});
afterAll(async () => runtime.close());

async function createSession(body: unknown = {}): Promise<SessionBody["session"]> {
  const res = await api.request("POST", "/v1/sessions", { body });
  expect(res.status).toBe(201);
  return (res.body as SessionBody).session;
}

function cursorOf(key: Record<string, string>): string {
  return Buffer.from(JSON.stringify(key)).toString("base64url");
}

/** Snapshot of everything the org can see, to prove a rejected request changed nothing. */
async function visibleState(): Promise<string> {
  const res = await api.request("GET", "/v1/sessions?limit=100");
  return JSON.stringify(res.body);
}

describe("health", () => {
  it("answers without a token", async () => {
    const res = await api.request("GET", "/v1/health", { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, wsUrl: runtime.wsUrl });
  });
});

describe("sessions: the happy path exactly as API.md says", () => {
  it("creates a starting session with no sandbox, then gets and lists it", async () => {
    const res = await api.request("POST", "/v1/sessions", {
      body: { title: "fix the bug", clientType: "cli", sessionType: "coding", repos: [{ url: "https://github.com/acme/app.git", branch: "main" }] },
    });
    expect(res.status).toBe(201);
    const session = (res.body as SessionBody).session;
    expect(session).toMatchObject({
      title: "fix the bug",
      status: "starting",
      sandboxId: null,
      snapshotId: null,
      clientType: "cli",
      sessionType: "coding",
      provider: "local",
      activeSeconds: 0,
    });
    expect(res.headers.get("location")).toBe(`/v1/sessions/${session.id}`);
    for (const field of ["id", "title", "status", "clientType", "sessionType", "provider", "sandboxId", "snapshotId", "pauseReason", "stopReason", "createdAt", "updatedAt", "pausedAt", "endedAt", "lastActivityAt", "sandboxExpiresAt", "activeSeconds"]) {
      expect(session).toHaveProperty(field);
    }
    expect(session).not.toHaveProperty("orgId");
    expect(session).not.toHaveProperty("version");

    const got = await api.request("GET", `/v1/sessions/${session.id}`);
    expect(got.status).toBe(200);
    expect((got.body as SessionBody).session).toEqual(session);

    const list = await api.request("GET", "/v1/sessions?status=starting&limit=100");
    expect(list.status).toBe(200);
    expect((list.body as { items: { id: string }[] }).items.map((i) => i.id)).toContain(session.id);
  });

  it("defaults: web client, coding session, the default provider", async () => {
    const session = await createSession();
    expect(session).toMatchObject({ clientType: "web", sessionType: "coding", provider: "local", title: null });
  });

  it("paginates with a cursor and never repeats or skips", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createSession({ title: `page ${i}` })).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 50; guard++) {
      const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
      const res = await api.request("GET", `/v1/sessions?limit=2${q}`);
      expect(res.status).toBe(200);
      const body = res.body as { items: { id: string }[]; nextCursor: string | null };
      expect(body.items.length).toBeLessThanOrEqual(2);
      seen.push(...body.items.map((i) => i.id));
      cursor = body.nextCursor;
      if (!cursor) break;
    }
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of ids) expect(seen).toContain(id);
    // Newest first.
    expect(seen.indexOf(ids[4] as string)).toBeLessThan(seen.indexOf(ids[0] as string));
  });

  it("heartbeat moves lastActivityAt only (204) and never resumes", async () => {
    const session = await createSession();
    await new Promise((r) => setTimeout(r, 5)); // lastActivityAt has millisecond resolution
    const res = await api.request("POST", `/v1/sessions/${session.id}/heartbeat`);
    expect(res.status).toBe(204);
    const after = (await api.request("GET", `/v1/sessions/${session.id}`)).body as SessionBody;
    expect(Date.parse(after.session.lastActivityAt)).toBeGreaterThan(Date.parse(session.lastActivityAt));
    const { lastActivityAt: _a, ...rest } = after.session;
    const { lastActivityAt: _b, ...before } = session;
    expect(rest).toEqual(before);
  });
});

describe("tenancy", () => {
  it("another org gets 403 on get and heartbeat, and never sees the session in its list", async () => {
    const session = await createSession({ title: "private" });
    const get = await api.request("GET", `/v1/sessions/${session.id}`, { token: otherOrgToken });
    expect(get.status).toBe(403);
    expect((get.body as { error: { code: string } }).error.code).toBe("forbidden");
    const hb = await api.request("POST", `/v1/sessions/${session.id}/heartbeat`, { token: otherOrgToken });
    expect(hb.status).toBe(403);
    const list = await api.request("GET", "/v1/sessions?limit=100", { token: otherOrgToken });
    expect(JSON.stringify(list.body)).not.toContain(session.id);
    const unchanged = (await api.request("GET", `/v1/sessions/${session.id}`)).body as SessionBody;
    expect(unchanged.session).toEqual(session);
  });

  it("an unknown id is 404", async () => {
    const res = await api.request("GET", "/v1/sessions/ses_zzzzzzzzzzzzzzzzzzzzzzzzzz");
    expect(res.status).toBe(404);
  });
});

describe("bad input: the right 4xx, a message naming the problem, nothing changed", () => {
  const bigTitle = "x".repeat(80 * 1024);
  const cases: { name: string; method: string; path: string; status: number; code: string; mentions: string; token?: string | null; body?: unknown; rawBody?: string }[] = [
    { name: "missing token", method: "POST", path: "/v1/sessions", token: null, body: {}, status: 401, code: "unauthorized", mentions: "Authorization" },
    { name: "malformed header", method: "GET", path: "/v1/sessions", token: "short", status: 401, code: "unauthorized", mentions: "Bearer" },
    { name: "unknown token", method: "GET", path: "/v1/sessions", token: "sbx_this-token-does-not-exist-anywhere", status: 401, code: "unauthorized", mentions: "token" },
    { name: "malformed JSON", method: "POST", path: "/v1/sessions", rawBody: '{"title": ', status: 400, code: "invalid_json", mentions: "JSON" },
    { name: "a JSON array body", method: "POST", path: "/v1/sessions", body: [1, 2], status: 400, code: "invalid_request", mentions: "body" },
    { name: "wrong field type", method: "POST", path: "/v1/sessions", body: { title: 42 }, status: 400, code: "invalid_request", mentions: "body.title" },
    { name: "unknown field", method: "POST", path: "/v1/sessions", body: { colour: "red" }, status: 400, code: "invalid_request", mentions: "colour" },
    { name: "unknown enum value", method: "POST", path: "/v1/sessions", body: { clientType: "fax" }, status: 400, code: "invalid_request", mentions: "body.clientType" },
    { name: "bad repo url", method: "POST", path: "/v1/sessions", body: { repos: [{ url: "not a url" }] }, status: 400, code: "invalid_request", mentions: "body.repos.0.url" },
    { name: "provider not enabled", method: "POST", path: "/v1/sessions", body: { provider: "modal" }, status: 400, code: "provider_unavailable", mentions: "modal" },
    { name: "oversized payload", method: "POST", path: "/v1/sessions", body: { title: bigTitle }, status: 413, code: "payload_too_large", mentions: "limit" },
    { name: "bad session id", method: "GET", path: "/v1/sessions/..%2F..%2Fetc", status: 400, code: "invalid_id", mentions: "id" },
    { name: "bad id on heartbeat", method: "POST", path: "/v1/sessions/123/heartbeat", status: 400, code: "invalid_id", mentions: "id" },
    { name: "limit out of range", method: "GET", path: "/v1/sessions?limit=1000", status: 400, code: "invalid_query", mentions: "query.limit" },
    { name: "unknown status filter", method: "GET", path: "/v1/sessions?status=sleeping", status: 400, code: "invalid_query", mentions: "query.status" },
    { name: "unknown query parameter", method: "GET", path: "/v1/sessions?colour=red", status: 400, code: "invalid_query", mentions: "colour" },
    { name: "forged cursor", method: "GET", path: "/v1/sessions?cursor=eyJQSyI6IlNFU1NJT04jeCJ9", status: 400, code: "invalid_cursor", mentions: "cursor" },
    // issue 14 §4: what used to be accepted (and fail later) or a 500.
    { name: "forged cursor with only the org's partition key", method: "GET", path: `/v1/sessions?cursor=${cursorOf({ GSI1PK: "ORG#dev-org" })}`, status: 400, code: "invalid_cursor", mentions: "cursor" },
    { name: "forged cursor with an extra attribute", method: "GET", path: `/v1/sessions?cursor=${cursorOf({ PK: "SESSION#ses_zzzzzzzzzzzzzzzzzzzzzzzzzz", SK: "SESSION", GSI1PK: "ORG#dev-org", GSI1SK: "2026#x", status: "running" })}`, status: 400, code: "invalid_cursor", mentions: "cursor" },
    { name: "malformed percent-encoding in the id", method: "GET", path: "/v1/sessions/%E0%A4%A", status: 400, code: "invalid_id", mentions: "id" },
    { name: "a JSON null body", method: "POST", path: "/v1/sessions", rawBody: "null", status: 400, code: "invalid_request", mentions: "body: must be a JSON object" },
    { name: "a JSON null prompt body", method: "POST", path: "/v1/sessions/ses_zzzzzzzzzzzzzzzzzzzzzzzzzz/prompts", rawBody: "null", status: 400, code: "invalid_request", mentions: "body: must be a JSON object" },
    { name: "credentials in a repo URL", method: "POST", path: "/v1/sessions", body: { repos: [{ url: "https://alice:secret@github.com/acme/app.git" }] }, status: 400, code: "invalid_request", mentions: "body.repos.0.url" },
    { name: "workspacePath leaving the workspace", method: "POST", path: "/v1/sessions", body: { repos: [{ url: "https://github.com/acme/app.git", workspacePath: "../../../../tmp/x" }] }, status: 400, code: "invalid_request", mentions: "body.repos.0.workspacePath" },
    { name: "env file path into .git", method: "POST", path: "/v1/sessions", body: { envFiles: [{ path: ".git/hooks/post-checkout", keys: [] }] }, status: 400, code: "invalid_request", mentions: "body.envFiles.0.path" },
    { name: "title with a bidi override", method: "POST", path: "/v1/sessions", body: { title: "a\u202eb" }, status: 400, code: "invalid_request", mentions: "body.title" },
    { name: "body on a bodiless route", method: "POST", path: "/v1/sessions/ses_zzzzzzzzzzzzzzzzzzzzzzzzzz/heartbeat", body: { x: 1 }, status: 400, code: "invalid_request", mentions: "body" },
    { name: "unknown route", method: "GET", path: "/v1/nothing-here", status: 404, code: "route_not_found", mentions: "/v1/nothing-here" },
  ];

  for (const c of cases) {
    it(`${c.name} -> ${c.status} ${c.code}`, async () => {
      const before = await visibleState();
      const res = await api.request(c.method, c.path, {
        ...(c.token !== undefined ? { token: c.token } : {}),
        ...(c.body !== undefined ? { body: c.body } : {}),
        ...(c.rawBody !== undefined ? { rawBody: c.rawBody, headers: { "content-type": "application/json" } } : {}),
      });
      expect(res.status).toBe(c.status);
      const err = (res.body as { error: { code: string; message: string } }).error;
      expect(err.code).toBe(c.code);
      expect(err.message).toContain(c.mentions);
      expect(await visibleState()).toBe(before);
    });
  }

  it("a heartbeat for a stopped session is 409 naming the state", async () => {
    const session = await createSession();
    const record = await runtime.deps.sessions.getSession(session.id);
    if (!record) throw new Error("missing");
    await runtime.deps.sessions.transition(record, "stopped", new Date());
    const res = await api.request("POST", `/v1/sessions/${session.id}/heartbeat`);
    expect(res.status).toBe(409);
    expect((res.body as { error: { message: string } }).error.message).toContain("stopped");
  });

  it("a repo URL's credentials are never echoed back", async () => {
    const res = await api.request("POST", "/v1/sessions", { body: { repos: [{ url: "https://alice:s3cret-pass-42@github.com/acme/app.git" }] } });
    expect(res.status).toBe(400);
    expect(res.text).not.toContain("s3cret-pass-42");
    expect(res.text).not.toContain("alice");
  });

  it("never echoes the token back in errors", async () => {
    const secret = "sbx_this-is-a-secret-token-value-XYZ";
    const res = await api.request("GET", "/v1/sessions", { token: secret });
    expect(res.status).toBe(401);
    expect(res.text).not.toContain(secret);
  });
});
