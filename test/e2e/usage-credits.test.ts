/**
 * Usage, limits and credits (issue 16, API.md "Usage, limits and credits") over real HTTP on the
 * local runtime, with the real local provider and real OpenCode, and the metering pass on its
 * timer (METERING_INTERVAL_SECONDS = 0.5): a member refused on the admin route, 400s naming the
 * field, a 429 at `maxRunningSessions` (the prompt still stored), every running session paused
 * with `credit_limit` once a small budget is spent, a 402 on the next create with nothing
 * created, and usage per day matching the sessions' `activeSeconds`.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { apiClient, startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";

const ORG = "org-credits";
let runtime: LocalRuntime;
let admin: ApiClient;
let member: ApiClient;

interface OrgBody {
  org: { id: string; limits: { maxRunningSessions: number | null; monthlyActiveSeconds: number | null }; usage: { period: string; activeSeconds: number; runningSessions: number } };
}
interface ErrorBody {
  error: { code: string; message: string };
}

beforeAll(async () => {
  ({ runtime } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { METERING_INTERVAL_SECONDS: "0.5" } }));
  admin = apiClient(runtime.url, await runtime.addApiToken({ userId: "ada", orgId: ORG, role: "admin" }));
  member = apiClient(runtime.url, await runtime.addApiToken({ userId: "mel", orgId: ORG, role: "member" }));
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime));
});
afterAll(async () => runtime?.close());

async function create(api: ApiClient, title: string): Promise<{ status: number; id: string; body: unknown }> {
  const res = await api.request("POST", "/v1/sessions", { body: { title } });
  return { status: res.status, body: res.body, id: res.status === 201 ? (res.body as { session: { id: string } }).session.id : "" };
}

async function waitForStatus(id: string, status: string, what = status): Promise<void> {
  await waitFor(`session ${id} to be ${what}`, async () => (await storedSession(runtime, id)).status === status);
}

async function org(api: ApiClient = admin): Promise<OrgBody["org"]> {
  const res = await api.request("GET", "/v1/org");
  expect(res.status, res.text).toBe(200);
  return (res.body as OrgBody).org;
}

describe("usage, limits and credits over HTTP", () => {
  const ids: string[] = [];

  it("GET /v1/org: unlimited by default; a member reads it but PUT /v1/org/limits is admin only; bad limits and dates are 400s naming the field", async () => {
    const view = await org(member);
    expect(view).toEqual({ id: ORG, limits: { maxRunningSessions: null, monthlyActiveSeconds: null }, usage: { period: new Date().toISOString().slice(0, 7), activeSeconds: 0, runningSessions: 0 } });

    const refused = await member.request("PUT", "/v1/org/limits", { body: { maxRunningSessions: 1 } });
    expect(refused.status).toBe(403);
    expect((refused.body as ErrorBody).error.message).toContain("admin");
    expect((await org()).limits.maxRunningSessions).toBeNull();

    for (const [body, field] of [
      [{ maxRunningSessions: -1 }, "maxRunningSessions"],
      [{ monthlyActiveSeconds: 1.5 }, "monthlyActiveSeconds"],
      [{ monthlyActiveSeconds: "100" }, "monthlyActiveSeconds"],
      [{ maxRunning: 3 }, "maxRunning"],
    ] as const) {
      const res = await admin.request("PUT", "/v1/org/limits", { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((res.body as ErrorBody).error.message).toContain(field);
    }
    for (const [query, field] of [
      ["from=2026-13-01", "from"],
      ["to=yesterday", "to"],
      ["from=2026-02-30", "from"],
      ["from=2026-03-02&to=2026-03-01", "from"],
    ] as const) {
      const res = await admin.request("GET", `/v1/usage?${query}`);
      expect(res.status, query).toBe(400);
      expect((res.body as ErrorBody).error.message).toContain(`query.${field}`);
    }
    expect((await org()).limits).toEqual({ maxRunningSessions: null, monthlyActiveSeconds: null });
  });

  it("maxRunningSessions reached: a resume and a wake are 429 quota_exceeded, the prompt is stored; raising the limit lets it run", { timeout: 110_000 }, async () => {
    const put = await admin.request("PUT", "/v1/org/limits", { body: { maxRunningSessions: 1 } });
    expect(put.status, put.text).toBe(200);
    expect((put.body as OrgBody).org.limits).toEqual({ maxRunningSessions: 1, monthlyActiveSeconds: null });

    const first = await create(admin, "first");
    const second = await create(admin, "second");
    expect([first.status, second.status]).toEqual([201, 201]);
    ids.push(first.id, second.id);
    expect((await admin.request("POST", `/v1/sessions/${first.id}/resume`)).status).toBe(202);
    await waitForStatus(first.id, "running");

    const resume = await admin.request("POST", `/v1/sessions/${second.id}/resume`);
    expect(resume.status).toBe(429);
    expect((resume.body as ErrorBody).error.code).toBe("quota_exceeded");
    expect((resume.body as ErrorBody).error.message).toContain("maxRunningSessions");
    const wake = await admin.request("POST", `/v1/sessions/${second.id}/prompts`, { body: { content: "say hello" } });
    expect(wake.status).toBe(429);
    expect((await runtime.deps.prompts.list(second.id, "queued")).length).toBe(1);
    expect((await storedSession(runtime, second.id)).status).toBe("starting");
    expect((await org()).usage.runningSessions).toBe(1);

    expect((await admin.request("PUT", "/v1/org/limits", { body: { maxRunningSessions: 2 } })).status).toBe(200);
    expect((await admin.request("POST", `/v1/sessions/${second.id}/resume`)).status).toBe(202);
    await waitForStatus(second.id, "running");
    expect((await org()).usage.runningSessions).toBe(2);
  });

  it("a spent monthlyActiveSeconds pauses every running session with credit_limit (snapshot kept) within a metering interval; the next create is a 402 with nothing created", { timeout: 110_000 }, async () => {
    const spent = (await org()).usage.activeSeconds;
    const budget = Math.ceil(spent) + 2;
    const put = await admin.request("PUT", "/v1/org/limits", { body: { monthlyActiveSeconds: budget } });
    expect(put.status, put.text).toBe(200);
    for (const id of ids) await waitForStatus(id, "paused", "paused by the credit limit");
    await runtime.flows.whenIdle();
    for (const id of ids) {
      const s = await storedSession(runtime, id);
      expect(s.pauseReason).toBe("credit_limit");
      expect(s.snapshotId).not.toBeNull();
      const events = (await admin.request("GET", `/v1/sessions/${id}/events`)).body as { items: { flow: string; outcome: string; reason: string | null }[] };
      expect(events.items.some((e) => e.flow === "pause" && e.outcome === "committed" && e.reason === "credit_limit")).toBe(true);
    }
    const view = await org();
    expect(view.usage.activeSeconds).toBeGreaterThanOrEqual(budget);
    expect(view.usage.runningSessions).toBe(0);

    const before = ((await admin.request("GET", "/v1/sessions?limit=100")).body as { items: { id: string }[] }).items.map((s) => s.id);
    const refused = await create(admin, "over budget");
    expect(refused.status).toBe(402);
    expect((refused.body as ErrorBody).error.code).toBe("credits_exhausted");
    expect((refused.body as ErrorBody).error.message).toContain("monthlyActiveSeconds");
    const after = ((await admin.request("GET", "/v1/sessions?limit=100")).body as { items: { id: string }[] }).items.map((s) => s.id);
    expect(after).toEqual(before);
    const resume = await admin.request("POST", `/v1/sessions/${ids[0] ?? ""}/resume`);
    expect(resume.status).toBe(402);
    const wake = await admin.request("POST", `/v1/sessions/${ids[1] ?? ""}/prompts`, { body: { content: "later" } });
    expect(wake.status).toBe(402);
    expect((await storedSession(runtime, ids[1] ?? "")).status).toBe("paused");
  });

  it("GET /v1/usage: per UTC day, matching the sessions' activeSeconds to the millisecond", async () => {
    const res = await admin.request("GET", "/v1/usage");
    expect(res.status, res.text).toBe(200);
    const usage = res.body as { items: { day: string; activeSeconds: number; sessions: number }[]; total: number };
    const sessions = await Promise.all(ids.map((id) => storedSession(runtime, id)));
    const expectedMs = sessions.reduce((sum, s) => sum + Math.round(s.activeSeconds * 1000), 0);
    expect(Math.round(usage.total * 1000)).toBe(expectedMs);
    expect(usage.items.reduce((sum, d) => sum + Math.round(d.activeSeconds * 1000), 0)).toBe(expectedMs);
    const today = new Date().toISOString().slice(0, 10);
    expect(usage.items.at(-1)?.day).toBe(today);
    for (const d of usage.items) expect(d.sessions).toBeGreaterThanOrEqual(1);
    expect(Math.max(...usage.items.map((d) => d.sessions))).toBe(2);
    // The same day asked for explicitly; another org sees none of it.
    const one = (await admin.request("GET", `/v1/usage?from=${today}&to=${today}`)).body as { items: { day: string }[] };
    expect(one.items.map((d) => d.day)).toEqual([today]);
    const other = apiClient(runtime.url, await runtime.addApiToken({ userId: "olga", orgId: "org-credits-other" }));
    expect((await other.request("GET", "/v1/usage")).body).toEqual({ items: [], total: 0 });
  });
});
