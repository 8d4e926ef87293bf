/**
 * `GET /v1/ops/summary` on the local runtime (issue 19): admin only (a member gets 403, no token
 * 401), and the figures are the in-process metrics the lifecycle emitted: a session started on the
 * in-memory provider (with a scripted agent: no OpenCode) shows its time to running by provider and start kind, and its provider
 * calls by operation, a prompt's queue wait, and the metering pass's sessions by status.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OpsSummary } from "../../functions/observability/ops-summary";
import type { LocalRuntime } from "../../infra/local/runtime";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { apiClient, startRuntimeForTest, waitFor, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let admin: ApiClient;
let member: ApiClient;

beforeAll(async () => {
  ({ runtime, api: admin } = await startRuntimeForTest({ provider: async () => new InstantSandboxProvider({ type: "local" }), agent: new ScriptedAgent() }));
  member = apiClient(runtime.url, await runtime.addApiToken({ userId: "mia", orgId: "dev-org", role: "member" }));
});
afterAll(async () => runtime.close());

describe("GET /v1/ops/summary", () => {
  it("answers 403 to a member and 401 without a token", async () => {
    const forbidden = await member.request("GET", "/v1/ops/summary");
    expect(forbidden.status).toBe(403);
    expect((forbidden.body as { error: { code: string } }).error.code).toBe("forbidden");
    expect((await admin.request("GET", "/v1/ops/summary", { token: null })).status).toBe(401);
  });

  it("shows the figures the lifecycle emitted in this process: time to running by provider and start kind, provider calls", async () => {
    const before = (await admin.request("GET", "/v1/ops/summary")).body as { summary: OpsSummary };
    expect(before.summary.timeToRunningMs).toEqual([]);
    const created = await admin.request("POST", "/v1/sessions", { body: { title: "ops" } });
    expect(created.status).toBe(201);
    const id = (created.body as { session: { id: string } }).session.id;
    expect((await admin.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
    await waitFor("the session to run", async () => ((await admin.request("GET", `/v1/sessions/${id}`)).body as { session: { status: string } }).session.status === "running", 60_000);
    const res = await waitFor("time to running in the summary", async () => {
      const r = await admin.request("GET", "/v1/ops/summary");
      return (r.body as { summary: OpsSummary }).summary.timeToRunningMs.length > 0 ? r : null;
    });
    expect(res.status).toBe(200);
    const { summary } = res.body as { summary: OpsSummary };
    expect(summary.timeToRunningMs).toEqual([expect.objectContaining({ provider: "local", startKind: "fresh", count: 1 })]);
    expect(summary.timeToRunningMs[0]?.p50).toBeGreaterThanOrEqual(0);
    const calls = summary.providerCalls.map((c) => `${c.provider}/${c.operation}`);
    expect(calls).toContain("local/ensureSandbox");
    expect(summary.providerCalls.every((c) => c.durationMs.count >= 1 && c.errors === 0)).toBe(true);
    expect(summary.relay).toMatchObject({ heldStreams: expect.any(Number), takeovers: 0 });
    expect(Date.parse(summary.since)).toBeLessThanOrEqual(Date.parse(summary.at));

    // The metering pass's sessions-by-status gauge (it runs every minute; here on demand).
    await runtime.meter();
    const metered = ((await admin.request("GET", "/v1/ops/summary")).body as { summary: OpsSummary }).summary;
    expect(metered.sessionsByStatus).toEqual({ starting: 0, running: 1, paused: 0, error: 0 });

    // A prompt taken from the queue for delivery records its wait.
    expect((await admin.request("POST", `/v1/sessions/${id}/prompts`, { body: { content: "hello" } })).status).toBe(202);
    const waited = await waitFor("the prompt's queue wait in the summary", async () => {
      const r = (await admin.request("GET", "/v1/ops/summary")).body as { summary: OpsSummary };
      return r.summary.promptQueueWaitMs.count > 0 ? r.summary.promptQueueWaitMs : null;
    });
    expect(waited).toEqual({ count: 1, p50: expect.any(Number), p95: expect.any(Number), p99: expect.any(Number), max: expect.any(Number) });
  }, 90_000);
});
