/**
 * Issue 25 §5, black box on the local runtime (real OpenCode in the local provider, the
 * in-process relay, the real ASL; the sweeper's interval is left at its default 600 s, so it
 * plays no part):
 * - OpenCode killed inside a running sandbox: the boot restarts it, the relay reconnects, the
 *   session stays `running` and the agent answers again;
 * - the sandbox dies outside the control plane: the relay notices and the session is paused on
 *   its last snapshot (`sandbox_lost`); connecting again resumes it from that snapshot.
 */
import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { waitFor } from "../support/wait-for";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: { IDLE_SNAPSHOT_DELAY_SECONDS: "600", RELAY_SCAN_INTERVAL_SECONDS: "0.2", RELAY_LEASE_TTL_SECONDS: "3" },
  }));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime.close();
});

async function connect(sessionId: string): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token: runtime.devApiToken });
  clients.push(client);
  return client;
}

async function session(id: string): Promise<Record<string, unknown>> {
  return ((await api.request("GET", `/v1/sessions/${id}`)).body as { session: Record<string, unknown> }).session;
}

const isStatus = (status: string) => (m: ServerMessage) => m.type === "status" && m.status === status;

async function ask(client: TestWsClient, content: string): Promise<void> {
  client.send({ type: "prompt", content });
  await client.waitFor((m) => m.type === "message.finalize" && m.text === `echo: ${content}`, 90_000, `the answer to "${content}"`);
}

async function runningWithClient(): Promise<{ id: string; client: TestWsClient }> {
  const created = await api.request("POST", "/v1/sessions", { body: {} });
  expect(created.status).toBe(201);
  const id = (created.body as { session: { id: string } }).session.id;
  const client = await connect(id);
  await client.waitFor(isStatus("running"), 120_000, "running");
  await waitFor(() => Promise.resolve(runtime.relay().heldSessions()), { until: (held) => held.includes(id), message: "the relay streaming", timeoutMs: 30_000 });
  return { id, client };
}

/** The pid of the OpenCode server listening on the session's agent port (`opencode serve --port N`). */
async function openCodePid(id: string): Promise<number> {
  const stored = await runtime.flowDeps.sessions.getSession(id);
  const port = new URL(String(stored?.openCodeUrl)).port;
  const out = execFileSync("pgrep", ["-f", `serve --port ${port} `]).toString().trim().split("\n").map(Number);
  expect(out.length).toBeGreaterThan(0);
  return out[0] ?? 0;
}

describe("crashes and dead sandboxes (issue 25 §5)", () => {
  it("OpenCode killed in its sandbox is restarted by the boot: the session stays running and answers again", async () => {
    const { id, client } = await runningWithClient();
    await ask(client, "before the crash");
    const before = await openCodePid(id);
    const sandboxId = (await session(id)).sandboxId;
    process.kill(before, "SIGKILL");
    const after = await waitFor(() => openCodePid(id).catch(() => 0), { until: (pid) => pid > 0 && pid !== before, message: "OpenCode restarted", timeoutMs: 60_000 });
    expect(after).not.toBe(before);
    await ask(client, "after the crash");
    expect(await session(id)).toMatchObject({ status: "running", sandboxId });
  }, 240_000);

  it("a sandbox that dies outside the control plane is paused on its last snapshot (sandbox_lost) by the relay; connecting resumes it", async () => {
    const { id, client } = await runningWithClient();
    await ask(client, "remember the word amber");
    expect((await api.request("POST", `/v1/sessions/${id}/snapshot`)).status).toBe(202);
    const snapped = await waitFor(() => session(id), { until: (s) => typeof s.snapshotId === "string", message: "the snapshot", timeoutMs: 60_000 });
    await runtime.flows.whenIdle();
    const local = await runtime.flowDeps.provider("local");
    // Gone at the provider (a crash, an expiry): the control plane did not ask for it.
    await local.terminate(id, String(snapped.sandboxId));
    const paused = await waitFor(() => session(id), { until: (s) => s.status !== "running", message: "the lost sandbox noticed", timeoutMs: 30_000, intervalMs: 100 });
    expect(paused).toMatchObject({ status: "paused", pauseReason: "sandbox_lost", snapshotId: snapped.snapshotId, sandboxId: null });
    await client.waitFor(isStatus("paused"), 10_000, "the client told");
    await runtime.flows.whenIdle();
    const audit = ((await api.request("GET", `/v1/sessions/${id}/events`)).body as { items: { flow: string; outcome: string; actor: string; reason: string | null }[] }).items;
    expect(audit.find((e) => e.flow === "idle-snapshot" && e.outcome === "committed")).toMatchObject({ reason: "sandbox_lost", actor: expect.stringMatching(/^relay:/) });
    const again = await connect(id);
    await again.waitFor(isStatus("running"), 120_000, "running again");
    await ask(again, "what was the word?");
  }, 300_000);
});
