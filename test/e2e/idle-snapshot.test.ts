/**
 * Idle snapshotting end to end (seed 002) on the local runtime: real sockets, the real local
 * provider with real OpenCode, the in-process relay, the real local scheduler (event-driven idle
 * checks) and the same ASL the stack deploys. A short grace keeps it quick.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import { OpenCodeMessageReader } from "../../functions/relay/agent-messages";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { waitFor } from "../support/wait-for";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];
const GRACE_SECONDS = 2;

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: { IDLE_SNAPSHOT_DELAY_SECONDS: String(GRACE_SECONDS), RELAY_SCAN_INTERVAL_SECONDS: "0.2", RELAY_LEASE_TTL_SECONDS: "1.5" },
  }));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime.close();
});

async function createSession(body: Record<string, unknown> = {}): Promise<string> {
  const res = await api.request("POST", "/v1/sessions", { body });
  expect(res.status).toBe(201);
  return (res.body as { session: { id: string } }).session.id;
}

async function connect(sessionId: string): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token: runtime.devApiToken });
  clients.push(client);
  return client;
}

async function session(id: string): Promise<Record<string, unknown>> {
  return ((await api.request("GET", `/v1/sessions/${id}`)).body as { session: Record<string, unknown> }).session;
}

function waitForSession(id: string, done: (s: Record<string, unknown>) => boolean, what: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return waitFor(() => session(id), { until: done, message: what, timeoutMs, intervalMs: 100 });
}

/** Executions of `flow` the runtime started for the session. */
const executionsOf = (id: string, flow: string) => [...runtime.flows.executions.values()].filter((e) => e.flow === flow && e.input.sessionId === id).length;

const isStatus = (status: string) => (m: ServerMessage) => m.type === "status" && m.status === status;

/**
 * Sends a prompt and waits for the development model's answer to it (`echo: <prompt>`). After a
 * resume the relay may replay earlier messages (clients treat them as idempotent), so the answer
 * is matched by its text, never taken as "the next finalize".
 */
async function ask(client: TestWsClient, content: string): Promise<string> {
  client.send({ type: "prompt", content });
  const finalize = await client.waitFor((m) => m.type === "message.finalize" && m.text === `echo: ${content}`, 60_000, `the answer to "${content}"`);
  return String(finalize.text);
}

async function transcript(id: string): Promise<[string, string][]> {
  const items = ((await api.request("GET", `/v1/sessions/${id}/messages`)).body as { items: { role: string; text: string }[] }).items;
  return items.map((m) => [m.role, m.text]);
}

describe("idle snapshot on the local runtime", () => {
  it("verifications 3, 4, 5, 14, 16: the tab closes, the grace runs out, the sandbox is snapshotted and terminated; reopening restores the conversation", async () => {
    const id = await createSession();
    const first = await connect(id);
    await first.waitFor(isStatus("running"), 90_000, "running");
    expect(await ask(first, "remember the word teal")).toBe("echo: remember the word teal");
    const running = await session(id);
    const sandboxId = String(running.sandboxId);

    // Verification 3: the last client leaves; the idle check is armed for the grace expiry, not polled.
    await first.close();
    const armed = await waitForSession(id, () => runtime.scheduler.pending().some((p) => p.name === `idle-check-${id}`), "the idle check to be armed", 10_000);
    expect(armed.status).toBe("running");
    const paused = await waitForSession(id, (s) => s.status === "paused", "the idle snapshot", 60_000);
    expect(paused).toMatchObject({ pauseReason: "inactivity", sandboxId: null, endedAt: null });
    expect(paused.snapshotId).toEqual(expect.stringMatching(/^lsnap_/));
    const local = await runtime.flowDeps.provider("local");
    expect((await local.listSandboxes()).map((s) => s.sandboxId)).not.toContain(sandboxId);
    // The relay lets go at its next reconnect check (it stands down: its lease was taken).
    await waitForSession(id, () => !runtime.relay().heldSessions().includes(id), "the relay to let go", 15_000);

    // Verification 16: the relay's stream dropped when the sandbox went; several relay scans later
    // nothing has reconnected or resumed it.
    const scanned = runtime.relay().counters.scans;
    await waitFor(() => runtime.relay().counters.scans >= scanned + 3, { message: "three more relay scans" });
    expect(await session(id)).toMatchObject({ status: "paused", sandboxId: null });
    expect(runtime.relay().heldSessions()).not.toContain(id);
    const flowsAfter = [...runtime.flows.executions.values()].filter((e) => e.flow === "ensure-runtime").length;

    // Verification 14: clients can list and show paused sessions (the UI's status dot).
    const listed = ((await api.request("GET", "/v1/sessions?status=paused")).body as { items: { id: string; status: string; pauseReason: string }[] }).items;
    expect(listed.find((s) => s.id === id)).toMatchObject({ status: "paused", pauseReason: "inactivity" });

    // Verification 4 and 5: reopening resumes from the snapshot; the relay picks it up again from
    // the stored state, and the agent still has the conversation.
    const second = await connect(id);
    const init = await second.waitFor((m) => m.type === "init", 10_000, "init");
    expect(init).toMatchObject({ session: { id, status: "paused", pauseReason: "inactivity" } });
    await second.waitFor(isStatus("resuming"), 30_000, "resuming");
    await second.waitFor(isStatus("running"), 90_000, "running again");
    expect(await session(id)).toMatchObject({ status: "running", pauseReason: null });
    expect([...runtime.flows.executions.values()].filter((e) => e.flow === "ensure-runtime").length).toBe(flowsAfter + 1);
    expect(await ask(second, "what was the word?")).toBe("echo: what was the word?");
    // The agent itself kept the conversation: the same OpenCode session, with both turns in it.
    const resumed = await runtime.flowDeps.sessions.getSession(id);
    expect(resumed?.codingAgentSessionId).toBe(running.codingAgentSessionId);
    const agentMessages = await new OpenCodeMessageReader().listMessages(
      await agentEndpoint(runtime.flowDeps.sandboxKeys, id, String(resumed?.openCodeUrl)),
      String(resumed?.codingAgentSessionId),
    );
    expect(agentMessages.filter((m) => m.info.role === "user").map((m) => m.parts.map((p) => p.text ?? "").join(""))).toEqual(["remember the word teal", "what was the word?"]);
    expect((await transcript(id)).map(([role, text]) => `${role}: ${text}`)).toEqual([
      "user: remember the word teal",
      "assistant: echo: remember the word teal",
      "user: what was the word?",
      "assistant: echo: what was the word?",
    ]);
    const audit = ((await api.request("GET", `/v1/sessions/${id}/events`)).body as { items: { flow: string; outcome: string; actor: string }[] }).items;
    expect(audit.filter((e) => e.flow === "idle-snapshot")).toEqual([expect.objectContaining({ outcome: "committed", actor: "schedule:idle-check" })]);
    expect(runtime.metrics.values("IdleSnapshotLag").length).toBeGreaterThanOrEqual(1);
  });

  it("verification 8: proxy connections are a set by id: registering twice and removing twice stays consistent", async () => {
    const id = await createSession();
    const path = `/v1/sessions/${id}/proxy-connections/term-1`;
    expect((await api.request("PUT", path, { body: { kind: "terminal" } })).status).toBe(200);
    expect((await api.request("PUT", path, { body: { kind: "terminal" } })).status).toBe(200);
    const now = new Date();
    expect((await runtime.flowDeps.proxies.listLive(id, now)).map((p) => p.proxyId)).toEqual(["term-1"]);
    expect((await api.request("DELETE", path)).status).toBe(204);
    expect((await api.request("DELETE", path)).status).toBe(204);
    expect(await runtime.flowDeps.proxies.listLive(id, now)).toEqual([]);
    // Bad input names the problem and changes nothing.
    const bad = await api.request("PUT", `/v1/sessions/${id}/proxy-connections/${encodeURIComponent("../x")}`, { body: {} });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/proxyId/);
    const badKind = await api.request("PUT", path, { body: { kind: "teleport" } });
    expect(badKind.status).toBe(400);
    expect(await runtime.flowDeps.proxies.listLive(id, now)).toEqual([]);
  });

  it("verification 6 over HTTP: an open terminal proxy keeps a running session awake past its grace; closing it lets it pause", async () => {
    const id = await createSession();
    // Open before the sandbox is up: provisioning may take longer than the 2 s grace.
    expect((await api.request("PUT", `/v1/sessions/${id}/proxy-connections/t-9`, { body: { kind: "terminal" } })).status).toBe(200);
    expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
    await waitForSession(id, (s) => s.status === "running", "running", 90_000);
    // The idle check armed for the grace's end fires (and is not re-armed): the open proxy keeps it running.
    const check = `idle-check-${id}`;
    await waitFor(() => runtime.scheduler.fired(check) > 0 && !runtime.scheduler.pending().some((p) => p.name === check), { message: "the idle check at grace expiry", timeoutMs: 30_000 });
    await runtime.scheduler.whenIdle();
    expect((await session(id)).status).toBe("running");
    expect(executionsOf(id, "idle-snapshot")).toBe(0);
    expect((await api.request("DELETE", `/v1/sessions/${id}/proxy-connections/t-9`)).status).toBe(204);
    await waitForSession(id, (s) => s.status === "paused", "the pause once the proxy closed", 60_000);
  });

  it("the heartbeat refreshes the grace of a paused session but never resumes it (seed 002 §11b)", async () => {
    const id = await createSession();
    expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
    await waitForSession(id, (s) => s.status === "paused", "the idle pause of a session nobody uses", 120_000);
    await runtime.flows.whenIdle();
    const resumes = executionsOf(id, "ensure-runtime");
    expect((await api.request("POST", `/v1/sessions/${id}/heartbeat`)).status).toBe(204);
    // Whatever the heartbeat started (it must start nothing) has run to its end.
    await runtime.scheduler.whenIdle();
    await runtime.flows.whenIdle();
    expect(executionsOf(id, "ensure-runtime")).toBe(resumes);
    expect(await session(id)).toMatchObject({ status: "paused", sandboxId: null });
  });
});

describe("a restart with DATA_DIR", () => {
  it("schedules armed before the restart are gone; the startup sweep converges: the idle session is paused", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "scp-idle-restart-"));
    const env = { IDLE_SNAPSHOT_DELAY_SECONDS: "3", RELAY_SCAN_INTERVAL_SECONDS: "0.2", RELAY_LEASE_TTL_SECONDS: "1.5" };
    try {
      const first = await startRuntimeForTest({ dataDir, retryIntervalScale: 0.05, env: { ...env, IDLE_SNAPSHOT_DELAY_SECONDS: "600" } });
      const created = await first.api.request("POST", "/v1/sessions", { body: {} });
      const id = (created.body as { session: { id: string } }).session.id;
      expect((await first.api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
      await waitFor(() => first.runtime.flowDeps.sessions.getSession(id), { until: (s) => s?.status === "running", message: "running", timeoutMs: 90_000, intervalMs: 100 });
      await first.runtime.close(); // the sandbox outlives the process (DATA_DIR); its idle check does not

      const second = await startRuntimeForTest({ dataDir, retryIntervalScale: 0.05, env });
      try {
        const s = await waitFor(() => second.runtime.flowDeps.sessions.getSession(id), {
          until: (x) => x?.status === "paused",
          message: "the pause after the restart",
          timeoutMs: 60_000,
          intervalMs: 200,
        });
        expect(s).toMatchObject({ pauseReason: "inactivity", sandboxId: null });
        const local = await second.runtime.flowDeps.provider("local");
        expect(await local.listSandboxes()).toEqual([]);
      } finally {
        await second.runtime.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
