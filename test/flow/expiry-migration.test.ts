/**
 * Expiry migration (seed 000 §6, seed 002 constraint 11) through the real `migrate` ASL, fired
 * by the lifecycle scheduler exactly as in production: with a client connected (or an
 * automation session) the session moves to a new sandbox and stays running (`migrating` shown
 * meanwhile); with none it pauses with `pauseReason: "inactivity"`, never `stopped`. Prompts
 * that arrive during a migration are delivered after it, never dropped.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { waitFor } from "../support/wait-for";
import { submitPrompt } from "../../functions/services/submit-prompt";
import { ProviderError } from "../../functions/domain/errors";

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let agent: ScriptedAgent;
let h: FlowHarness;

beforeEach(async () => {
  inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false });
  provider = new FaultInjectingProvider(inner);
  agent = new ScriptedAgent();
  h = await startFlowHarness({ provider, agent, env: { MIGRATION_TURN_WAIT_SECONDS: "0.3" } });
});
afterEach(async () => {
  await h.close();
});

async function running(options: { clients?: number; clientType?: "web" | "automation" } = {}) {
  const s = await h.createSession({ clientType: options.clientType ?? "web" });
  const clients: string[] = [];
  for (let i = 0; i < (options.clients ?? 0); i++) clients.push(await h.addClient(s.id));
  await h.run("ensure-runtime", s.id);
  return { session: await h.session(s.id), clients };
}

/** Fires the session's expiry schedule now, through the schedule target, and waits for the flows it starts. */
async function fireExpiry(sessionId: string): Promise<void> {
  const fired = await makeScheduleFiredHandler(h.deps)({ sessionId, purpose: "expiry", at: new Date().toISOString() });
  expect(fired.started).toMatch(/^migrate-/);
  await h.runner.whenIdle();
}

async function prompts(sessionId: string) {
  return h.deps.prompts.list(sessionId);
}

describe("expiry migration", () => {
  it("the expiry schedule fires at sandboxExpiresAt - lead and starts migrate", async () => {
    await h.close();
    inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false, timeoutSeconds: 2 });
    provider = new FaultInjectingProvider(inner);
    h = await startFlowHarness({ provider, agent, env: { EXPIRY_MIGRATION_LEAD_SECONDS: "1.7" } });
    const s = await h.createSession();
    const running = await h.run("ensure-runtime", s.id);
    const armed = h.scheduler.pending().find((p) => p.name === `expiry-${s.id}`);
    expect(armed?.at.getTime()).toBe(Date.parse(running.sandboxExpiresAt ?? "") - 1_700);
    // No clients: when the timer fires (~0.3 s later) the session pauses for inactivity.
    await waitFor(() => h.session(s.id), { until: (x) => x.status === "paused", message: "the expiry's pause" });
    await h.runner.whenIdle();
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "inactivity" });
    expect([...h.runner.executions.values()].map((e) => e.flow)).toEqual(["ensure-runtime", "migrate"]);
    expect(h.scheduler.pending()).toEqual([]);
  });

  it("with a client connected: snapshot, new sandbox, still running; migrating shown meanwhile; old sandbox gone; expiry re-armed", async () => {
    const { session: s, clients } = await running({ clients: 1 });
    await fireExpiry(s.id);
    const after = await h.session(s.id);
    expect(after.status).toBe("running");
    expect(after.sandboxId).not.toBe(s.sandboxId);
    expect(after.snapshotId).toMatch(/^isnap_/);
    expect(inner.live()).toEqual([after.sandboxId]);
    expect(inner.sandbox(after.sandboxId ?? "")?.restoredFrom).toBe(after.snapshotId);
    expect(h.push.statuses(clients[0])).toEqual(["creating", "running", "migrating", "running"]);
    // The new sandbox's expiry, and the idle check a running session always has (seed 002).
    expect(h.scheduler.pending().map((p) => p.name).sort()).toEqual([`expiry-${s.id}`, `idle-check-${s.id}`]);
    const migrate = (await h.deps.events.list(s.id, { limit: 10 })).items.find((e) => e.flow === "migrate");
    expect(migrate).toMatchObject({ outcome: "committed", from: "running", to: "running", previousSandboxId: s.sandboxId, sandboxId: after.sandboxId, actor: "schedule:expiry" });
    expect(Object.keys(migrate?.timings ?? {})).toEqual(["begin", "quiesce", "snapshot", "terminate", "provision", "commit"]);
  });

  it("an automation session keeps running through expiry without any client", async () => {
    const { session: s } = await running({ clientType: "automation" });
    await fireExpiry(s.id);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "running" });
    expect(after.sandboxId).not.toBe(s.sandboxId);
  });

  it("seed 002 verification 12 (expiry idle path): with no clients it pauses with pauseReason inactivity, never stopped, no endedAt, and resumes from that snapshot", async () => {
    const { session: s } = await running();
    await fireExpiry(s.id);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "inactivity", sandboxId: null, endedAt: null });
    expect(inner.live()).toEqual([]);
    const resumed = await h.run("ensure-runtime", s.id);
    expect(resumed.status).toBe("running");
    expect(inner.sandbox(resumed.sandboxId ?? "")?.restoredFrom).toBe(after.snapshotId);
  });

  it("waits for the agent's turn, then aborts it after MIGRATION_TURN_WAIT_SECONDS", async () => {
    const { session: s } = await running({ clients: 1 });
    agent.setBusy(s.codingAgentSessionId ?? "", true);
    await fireExpiry(s.id);
    expect(agent.aborts).toEqual([s.codingAgentSessionId]);
    const migrate = (await h.deps.events.list(s.id, { limit: 10 })).items.find((e) => e.flow === "migrate");
    expect(migrate?.timings.quiesce).toBeGreaterThanOrEqual(250);
  });

  it("a turn that finishes within the wait is not aborted", async () => {
    const { session: s } = await running({ clients: 1 });
    // The turn ends right after the migration's first look finds it busy.
    agent.setBusy(s.codingAgentSessionId ?? "", true, { checks: 1 });
    await fireExpiry(s.id);
    expect(agent.busyChecks.get(s.codingAgentSessionId ?? "")).toBe(2); // busy, then done: the wait saw the turn end
    expect(agent.aborts).toEqual([]);
    expect((await h.session(s.id)).status).toBe("running");
  });

  for (const branch of ["migrate", "pause"] as const) {
    it(`a prompt that arrives during the ${branch} branch is delivered after it, not dropped`, async () => {
      const { session: s } = await running({ clients: branch === "migrate" ? 1 : 0 });
      const held = provider.hold("snapshot");
      const fired = makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
      await held.reached;
      // The prompt route: store, count (the activity write), then deliver. The lease is held, so delivery defers.
      const { prompt, delivery } = await submitPrompt(h.deps, await h.session(s.id), { content: "keep going", source: "user:u" });
      expect(delivery).toBe("deferred");
      expect(agent.prompts).toEqual([]);
      held.release();
      await fired;
      await h.runner.whenIdle();
      const after = await h.session(s.id);
      // Either way the prompt reaches an agent on a live sandbox: the migrated one, or the one
      // the finish step woke the paused session into.
      expect(after.status).toBe("running");
      expect(after.sandboxId).not.toBe(s.sandboxId);
      expect(agent.prompts.map((p) => p.text)).toEqual(["keep going"]);
      expect((await prompts(s.id)).find((p) => p.promptId === prompt.promptId)?.status).toBe("processing");
      const flows = [...h.runner.executions.values()].map((e) => e.flow);
      expect(flows).toEqual(branch === "migrate" ? ["ensure-runtime", "migrate"] : ["ensure-runtime", "migrate", "ensure-runtime"]);
    });
  }

  it("the old sandbox is gone before the new one starts: never two live sandboxes for the session", async () => {
    const { session: s } = await running({ clients: 1 });
    const held = provider.hold("createSandbox");
    const fired = makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    await held.reached;
    expect(inner.live()).toEqual([]);
    held.release();
    await fired;
    await h.runner.whenIdle();
    expect(inner.live()).toHaveLength(1);
  });

  it("a failed provision during migration pauses the session on the snapshot it took (resumable, never lost)", async () => {
    const { session: s, clients } = await running({ clients: 1 });
    provider.failNext("createSandbox", new ProviderError("local", "createSandbox", "capacity", { retryable: false }));
    await fireExpiry(s.id);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "migration_failed", sandboxId: null });
    expect(after.snapshotId).toMatch(/^isnap_/);
    expect(inner.live()).toEqual([]);
    expect(h.push.statuses(clients[0]).at(-1)).toBe("paused");
    const resumed = await h.run("ensure-runtime", s.id);
    expect(resumed.status).toBe("running");
    expect(inner.sandbox(resumed.sandboxId ?? "")?.restoredFrom).toBe(after.snapshotId);
  });

  it("an old sandbox that cannot be terminated keeps serving: no second sandbox is created", async () => {
    const { session: s } = await running({ clients: 1 });
    provider.failNext("terminate", new ProviderError("local", "terminate", "timeout", { retryable: true }));
    await fireExpiry(s.id);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(provider.callsOf("createSandbox")).toHaveLength(0);
    expect(inner.live()).toEqual([s.sandboxId]);
  });

  it("an expiry for a session that is no longer running does nothing", async () => {
    const { session: s } = await running();
    await h.run("pause", s.id);
    await fireExpiry(s.id);
    const migrate = (await h.deps.events.list(s.id, { limit: 10 })).items.find((e) => e.flow === "migrate");
    expect(migrate).toMatchObject({ outcome: "skipped", message: "session is paused" });
  });
});
