/**
 * The lifecycle over real HTTP on the local runtime with the real local provider and real
 * OpenCode (development model): resume, prompt, pause, prompt-wakes-paused, snapshot, stop,
 * the audit trail, 409s naming the state, and concurrent resumes producing one sandbox.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import type { SessionRecord } from "../../functions/domain/session";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let otherOrgToken: string;

beforeAll(async () => {
  // A relay scan once an hour (issue 15): every claim here comes from a flow's nudge, never a scan.
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "3600" } }));
  otherOrgToken = await runtime.addApiToken({ userId: "mallory", orgId: "org-other" });
});
afterAll(async () => runtime.close());

async function createSession(): Promise<string> {
  const res = await api.request("POST", "/v1/sessions", { body: { title: "lifecycle" } });
  expect(res.status).toBe(201);
  return (res.body as { session: { id: string } }).session.id;
}

async function waitForStatus(id: string, status: string): Promise<SessionRecord> {
  return waitFor(`session ${id} to be ${status}`, async () => {
    await runtime.flows.whenIdle();
    const s = await storedSession(runtime, id);
    return s.status === status ? s : null;
  });
}

/** The texts of the OpenCode transcript of the session's running sandbox (with the session's agent password). */
async function transcript(id: string): Promise<string> {
  const s = await storedSession(runtime, id);
  if (!s.openCodeUrl || !s.codingAgentSessionId) return "";
  const { authorization } = await agentEndpoint(runtime.flowDeps.sandboxKeys, id, s.openCodeUrl);
  const res = await fetch(`${s.openCodeUrl}/session/${s.codingAgentSessionId}/message`, { headers: { authorization: String(authorization) } });
  return res.ok ? await res.text() : "";
}

async function liveSandboxes(): Promise<string[]> {
  const provider = await runtime.flowDeps.provider("local");
  const { listSandboxRecords } = await import("../../functions/providers/local/sandbox-registry");
  const ids = (await listSandboxRecords(runtime.sandboxDir)).map((r) => r.sandboxId);
  return provider.checkSandboxes(ids);
}

/** Where the local provider keeps a snapshot. */
function snapshotDir(snapshotId: string | null): string {
  if (!snapshotId) throw new Error("no snapshot id");
  return join(runtime.sandboxDir, "snapshots", snapshotId);
}

describe("lifecycle over HTTP with real OpenCode", () => {
  let id: string;
  let pausedSnapshot: string | null = null;
  let checkpoint: string | null = null;
  let firstSandbox: string | null;

  it("resume provisions the sandbox: 202 at once, then running", async () => {
    id = await createSession();
    const res = await api.request("POST", `/v1/sessions/${id}/resume`);
    expect(res.status).toBe(202);
    expect((res.body as { session: { status: string } }).session.status).toBe("starting");
    const running = await waitForStatus(id, "running");
    firstSandbox = running.sandboxId;
    expect(await liveSandboxes()).toEqual([firstSandbox]);
    expect(running.codingAgentSessionId).toMatch(/^ses/);
    const view = ((await api.request("GET", `/v1/sessions/${id}`)).body as { session: Record<string, unknown> }).session;
    expect(view).not.toHaveProperty("openCodeUrl");
  });

  it("a prompt to a running session reaches the agent", async () => {
    // No wait for a relay scan (issue 15): the flow that committed `running` nudged the relay, which
    // claimed the session before the flow finished, so the first prompt goes straight to the agent.
    const res = await api.request("POST", `/v1/sessions/${id}/prompts`, { body: { content: "first words" } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ prompt: { status: "processing" }, delivery: "sent" });
    expect(runtime.relay().counters.scans).toBe(1); // the one at start
    await waitFor("the echo", async () => (await transcript(id)).includes("echo: first words"));
  });

  it("pause snapshots and terminates: paused with pauseReason user, no sandbox process left", async () => {
    const res = await api.request("POST", `/v1/sessions/${id}/pause`);
    expect(res.status).toBe(202);
    const paused = await waitForStatus(id, "paused");
    expect(paused).toMatchObject({ pauseReason: "user", sandboxId: null });
    expect(paused.snapshotId).toBeTruthy();
    expect(await liveSandboxes()).toEqual([]);
    // issue 22 §3: the view says what a resume restores (a local snapshot: a filesystem copy that never expires).
    const view = await api.request("GET", `/v1/sessions/${id}`);
    expect((view.body as { session: { restoreFrom: unknown } }).session.restoreFrom).toEqual({
      kind: "filesystem",
      snapshotId: paused.snapshotId,
      expiresAt: null,
      expired: false,
      fallback: null,
    });
    pausedSnapshot = paused.snapshotId;
  });

  it("409 names the state for illegal requests, and changes nothing", async () => {
    const before = await storedSession(runtime, id);
    const pause = await api.request("POST", `/v1/sessions/${id}/pause`);
    expect(pause.status).toBe(409);
    expect(pause.body).toEqual({ error: { code: "conflict", message: "session is paused: cannot pause" } });
    const snap = await api.request("POST", `/v1/sessions/${id}/snapshot`);
    expect(snap.status).toBe(409);
    expect((await storedSession(runtime, id)).version).toBe(before.version);
  });

  it("a prompt to a paused session wakes it; the restored agent keeps its history and answers", async () => {
    const res = await api.request("POST", `/v1/sessions/${id}/prompts`, { body: { content: "after the pause" } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ prompt: { status: "queued" }, delivery: "woken" });
    const running = await waitForStatus(id, "running");
    expect(running.sandboxId).not.toBe(firstSandbox);
    const text = await waitFor("the second echo", async () => {
      const t = await transcript(id);
      return t.includes("echo: after the pause") ? t : null;
    });
    expect(text).toContain("echo: first words");
    // The relay completes each turn on the agent's idle boundary.
    await waitFor("both prompts completed", async () => (await runtime.deps.prompts.list(id)).every((p) => p.status === "completed"));
  });

  it("snapshot keeps the session running on the same sandbox", async () => {
    const before = await storedSession(runtime, id);
    const res = await api.request("POST", `/v1/sessions/${id}/snapshot`);
    expect(res.status).toBe(202);
    const after = await waitFor("a new snapshot", async () => {
      await runtime.flows.whenIdle();
      const s = await storedSession(runtime, id);
      return s.snapshotId !== before.snapshotId ? s : null;
    });
    expect(after).toMatchObject({ status: "running", sandboxId: before.sandboxId });
    // issue 22 §4: the pause's snapshot is superseded by the checkpoint and deleted once it is committed.
    await waitFor("the superseded snapshot to be deleted", () => (existsSync(snapshotDir(pausedSnapshot)) ? null : true));
    expect(existsSync(snapshotDir(after.snapshotId))).toBe(true);
    checkpoint = after.snapshotId;
  });

  it("the audit trail lists each flow with outcome, transition, actor and step timings", async () => {
    const res = await api.request("GET", `/v1/sessions/${id}/events`);
    expect(res.status).toBe(200);
    const items = (res.body as { items: { flow: string; outcome: string; from: string; to: string; actor: string; timings: Record<string, number> }[] }).items;
    expect(items.map((e) => `${e.flow}:${e.outcome}:${e.from}->${e.to}`)).toEqual([
      "ensure-runtime:committed:starting->running",
      "pause:committed:running->paused",
      "ensure-runtime:committed:paused->running",
      "snapshot:committed:running->running",
    ]);
    expect(items.every((e) => e.actor === "user:dev-user")).toBe(true);
    expect(items[0]?.timings.provision).toBeGreaterThan(0);
    const page = await api.request("GET", `/v1/sessions/${id}/events?limit=2`);
    const next = (page.body as { nextCursor: string }).nextCursor;
    const rest = await api.request("GET", `/v1/sessions/${id}/events?limit=10&cursor=${encodeURIComponent(next)}`);
    expect((rest.body as { items: unknown[] }).items).toHaveLength(2);
  });

  it("another org gets 403 on every action; bad input is a 400 naming the field", async () => {
    for (const [method, path] of [
      ["POST", "resume"],
      ["POST", "pause"],
      ["POST", "snapshot"],
      ["GET", "events"],
    ] as const) {
      expect((await api.request(method, `/v1/sessions/${id}/${path}`, { token: otherOrgToken })).status).toBe(403);
    }
    expect((await api.request("DELETE", `/v1/sessions/${id}`, { token: otherOrgToken })).status).toBe(403);
    const empty = await api.request("POST", `/v1/sessions/${id}/prompts`, { body: { content: "   " } });
    expect(empty.status).toBe(400);
    expect((empty.body as { error: { message: string } }).error.message).toBe("body.content: must not be empty");
    const extra = await api.request("POST", `/v1/sessions/${id}/prompts`, { body: { content: "x", model: "y" } });
    expect(extra.status).toBe(400);
    const cursor = await api.request("GET", `/v1/sessions/${id}/events?cursor=bogus`);
    expect(cursor.status).toBe(400);
    expect((await runtime.deps.prompts.list(id)).length).toBe(2);
  });

  it("stop terminates the sandbox and ends the session; then every action is 409", async () => {
    const res = await api.request("DELETE", `/v1/sessions/${id}`);
    expect(res.status).toBe(202);
    const stopped = await waitForStatus(id, "stopped");
    expect(stopped).toMatchObject({ sandboxId: null, stopReason: "user", snapshotId: null });
    expect(await liveSandboxes()).toEqual([]);
    // A stopped session keeps no snapshot (issue 22 §4).
    expect(existsSync(snapshotDir(checkpoint))).toBe(false);
    for (const path of ["resume", "pause", "snapshot", "prompts"]) {
      const r = await api.request("POST", `/v1/sessions/${id}/${path}`, { body: path === "prompts" ? { content: "x" } : undefined });
      expect(r.status).toBe(409);
      expect((r.body as { error: { message: string } }).error.message).toMatch(/^session is stopped: cannot /);
    }
  });
});

describe("concurrency over HTTP", () => {
  it("10 concurrent resume requests for one paused session produce exactly one sandbox", async () => {
    const id = await createSession();
    await api.request("POST", `/v1/sessions/${id}/resume`);
    await waitForStatus(id, "running");
    await api.request("POST", `/v1/sessions/${id}/pause`);
    await waitForStatus(id, "paused");
    const responses = await Promise.all(Array.from({ length: 10 }, () => api.request("POST", `/v1/sessions/${id}/resume`)));
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(202));
    const running = await waitForStatus(id, "running");
    await runtime.flows.whenIdle();
    expect(await liveSandboxes()).toEqual([running.sandboxId]);
    const resumes = (await runtime.deps.events.list(id, { limit: 50 })).items.filter((e) => e.flow === "ensure-runtime" && e.outcome === "committed");
    expect(resumes).toHaveLength(2); // the first provision and this one resume
    await api.request("DELETE", `/v1/sessions/${id}`);
    await waitForStatus(id, "stopped");
  });
});

describe("initial prompt", () => {
  it("is queued at create (no sandbox yet) and delivered by the first resume", async () => {
    const res = await api.request("POST", "/v1/sessions", { body: { initialPrompt: "set up the project" } });
    const id = (res.body as { session: { id: string } }).session.id;
    expect((await runtime.deps.prompts.list(id)).map((p) => [p.content, p.status])).toEqual([["set up the project", "queued"]]);
    expect(await liveSandboxes()).toEqual([]);
    await api.request("POST", `/v1/sessions/${id}/resume`);
    await waitForStatus(id, "running");
    await waitFor("the echo of the initial prompt", async () => (await transcript(id)).includes("echo: set up the project"));
    await api.request("DELETE", `/v1/sessions/${id}`);
    await waitForStatus(id, "stopped");
  });
});
