/**
 * Issue 25 §1, black box, on the local runtime (real sockets, real OpenCode in the local
 * provider, the in-process relay, the real scheduler and ASL): clients whose tab closed come back
 * 0-1,200 ms after their 3 s grace ran out, that is before, during or after the idle snapshot
 * the grace started. Every one of them must end on a running session with its client connected.
 * Before the fix about half ended `paused` (inactivity) with the client connected.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { waitFor } from "../support/wait-for";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];
const GRACE_SECONDS = 3;
/** When each client comes back, after its grace ran out. */
const RETURN_AFTER_GRACE_MS = [0, 240, 480, 720, 960, 1200];

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

async function connect(sessionId: string): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token: runtime.devApiToken });
  clients.push(client);
  return client;
}

async function session(id: string): Promise<Record<string, unknown>> {
  return ((await api.request("GET", `/v1/sessions/${id}`)).body as { session: Record<string, unknown> }).session;
}

const isStatus = (status: string) => (m: ServerMessage) => m.type === "status" && m.status === status;

/** One session: running with a client, the tab closes, the client returns `afterGraceMs` after the grace ran out. */
async function leaveAndReturn(afterGraceMs: number): Promise<{ id: string; client: TestWsClient; sawPaused: boolean }> {
  const created = await api.request("POST", "/v1/sessions", { body: {} });
  expect(created.status).toBe(201);
  const id = (created.body as { session: { id: string } }).session.id;
  const first = await connect(id);
  await first.waitFor(isStatus("running"), 120_000, `${id} running`);
  await first.close();
  // The disconnect touched activity: the grace runs from there (the stored lastActivityAt).
  const left = await waitFor(() => runtime.flowDeps.sessions.getSession(id), {
    until: (s) => s !== null && runtime.scheduler.pending().some((p) => p.name === `idle-check-${id}`),
    message: `${id}: the idle check armed after the tab closed`,
    timeoutMs: 15_000,
  });
  const graceEndsAt = Date.parse(left?.lastActivityAt ?? "") + GRACE_SECONDS * 1000;
  // The scenario's input is the moment the client returns (not a synchronisation): wall-clock time.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, graceEndsAt + afterGraceMs - Date.now())));
  const client = await connect(id);
  await waitFor(() => session(id), { until: (s) => s.status === "running", message: `${id} running for its returning client`, timeoutMs: 120_000, intervalMs: 100 });
  return { id, client, sawPaused: client.statuses().includes("paused") };
}

describe("clients returning just after their grace ran out (issue 25 §1)", () => {
  it("every one ends on a running session with its client connected, whether the idle snapshot had not started, was running or had committed", async () => {
    const outcomes = await Promise.all(RETURN_AFTER_GRACE_MS.map((ms) => leaveAndReturn(ms)));
    // Settled: no flow left in flight that could still move a session.
    await runtime.flows.whenIdle();
    for (const { id, client } of outcomes) {
      const s = await session(id);
      expect(s, id).toMatchObject({ status: "running", pauseReason: null });
      expect(client.closed, `${id}: client still connected`).toBe(false);
      await client.waitFor(isStatus("running"), 60_000, `${id}: the client told it is running`);
      expect(client.statuses().at(-1), id).toBe("running");
      // Whatever happened meanwhile, the session has exactly one live sandbox.
      const live = (await (await runtime.flowDeps.provider("local")).listSandboxes()).filter((x) => x.sessionId === id);
      expect(live.map((x) => x.sandboxId), id).toEqual([s.sandboxId]);
    }
    // The audit trail says which path each took (informational; the assertions above are the contract).
    const paths = await Promise.all(
      outcomes.map(async ({ id }) => ((await api.request("GET", `/v1/sessions/${id}/events`)).body as { items: { flow: string; outcome: string }[] }).items.map((e) => `${e.flow}:${e.outcome}`)),
    );
    expect(paths.every((p) => p.includes("ensure-runtime:committed"))).toBe(true);
  }, 420_000);
});
