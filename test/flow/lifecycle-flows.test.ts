/**
 * Every lifecycle flow through its real ASL file (local flow runner) with the real step
 * functions over dynalite, on the instant provider wrapped in the fault-injecting provider.
 * Races and faults are staged with the wrapper's holds and failure plans; the flows' clock is
 * moved forward to expire leases mid-operation.
 */
import { afterEach, beforeEach, describe, expect, it, onTestFailed } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import type { SessionRecord } from "../../functions/domain/session";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, TEST_MASTER_KEY, type FlowHarness } from "../support/flow-harness";
import { deriveSandboxKey } from "../../sandbox/shared/access-token";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { seededRandom, shuffled, testSeed } from "../support/seeded-random";

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let agent: ScriptedAgent;
let h: FlowHarness;

async function setup(options: { supportsPause?: boolean; supportsMemorySnapshot?: boolean; env?: Record<string, string> } = {}): Promise<void> {
  inner = new InstantSandboxProvider({ supportsPause: options.supportsPause ?? false, supportsMemorySnapshot: options.supportsMemorySnapshot ?? false });
  provider = new FaultInjectingProvider(inner);
  agent = new ScriptedAgent();
  h = await startFlowHarness({ provider, agent, ...(options.env ? { env: options.env } : {}) });
}

beforeEach(async () => {
  await setup();
});
afterEach(async () => {
  await h.close();
});

/** The invariants every end state must satisfy (ARCHITECTURE.md §4). */
async function expectConsistent(sessionId: string): Promise<SessionRecord> {
  const s = await h.session(sessionId);
  const live = inner.live();
  // At most one live sandbox per session, and no live sandbox that the session does not reference.
  expect(live.filter((id) => id !== s.sandboxId)).toEqual([]);
  if (s.status === "running") expect(live).toEqual([s.sandboxId]);
  if (s.status === "paused") expect(s.snapshotId).toBeTruthy();
  if (s.status === "stopped" || s.status === "error" || s.status === "starting") expect(live).toEqual([]);
  expect(await h.deps.sessions.readLease(sessionId)).toMatchObject({ owner: null });
  return s;
}

async function runningSession(clients = 0): Promise<SessionRecord> {
  const s = await h.createSession();
  for (let i = 0; i < clients; i++) await h.addClient(s.id);
  await h.run("ensure-runtime", s.id);
  return h.session(s.id);
}

async function events(sessionId: string) {
  return (await h.deps.events.list(sessionId, { limit: 100 })).items;
}

describe("ensure-runtime", () => {
  it("provisions a starting session: running, sandbox recorded, lease released, expiry armed, audit written", async () => {
    const s = await h.createSession();
    const client = await h.addClient(s.id);
    const after = await h.run("ensure-runtime", s.id);
    expect(after.status).toBe("running");
    expect(after.sandboxId).toBe(inner.live()[0]);
    expect(after.codingAgentSessionId).toBe("agent_1");
    expect(after.openCodeUrl).toBe("http://instant.invalid");
    expect(await h.deps.sessions.readLease(s.id)).toMatchObject({ owner: null, fence: 1 });
    expect(h.push.statuses(client)).toEqual(["creating", "running"]);
    const expiry = h.scheduler.pending().find((p) => p.name === `expiry-${s.id}`);
    expect(expiry?.at.getTime()).toBe(Date.parse(after.sandboxExpiresAt ?? "") - h.config.EXPIRY_MIGRATION_LEAD_SECONDS * 1000);
    const [event, ...rest] = await events(s.id);
    expect(rest).toEqual([]);
    expect(event).toMatchObject({ flow: "ensure-runtime", outcome: "committed", from: "starting", to: "running", actor: "test", sandboxId: after.sandboxId });
    expect(Object.keys(event?.timings ?? {})).toEqual(["begin", "provision", "commit"]);
  });

  it("gives every freshly booted sandbox of a session a new key epoch's sandbox key as SIDECAR_TOKEN, and stores only the epoch (issue 14 §2)", async () => {
    const a = await runningSession();
    const b = await runningSession();
    await h.run("pause", a.id);
    await h.run("ensure-runtime", a.id);
    const tokens = inner.createCalls.map((c) => [c.sessionId, c.envVars.SIDECAR_TOKEN]);
    expect(tokens).toEqual([
      [a.id, deriveSandboxKey(TEST_MASTER_KEY, a.id, 1)],
      [b.id, deriveSandboxKey(TEST_MASTER_KEY, b.id, 1)],
      // No native pause here: the resume boots a new sandbox from the snapshot, with a new key,
      // so a key that leaked from the first sandbox is worthless once this one is committed.
      [a.id, deriveSandboxKey(TEST_MASTER_KEY, a.id, 2)],
    ]);
    expect(new Set(tokens.map(([, t]) => t)).size).toBe(3);
    for (const c of inner.createCalls) expect(c.envVars.SESSION_ID).toBe(c.sessionId);
    expect((await h.session(a.id)).sandboxKeyEpoch).toBe(2);
    expect((await h.session(b.id)).sandboxKeyEpoch).toBe(1);
    // Every later caller (agent calls, access tokens) derives the committed epoch's key.
    expect(await h.deps.sandboxKeys.sandboxKey(a.id)).toBe(deriveSandboxKey(TEST_MASTER_KEY, a.id, 2));
    for (const id of [a.id, b.id]) {
      const stored = JSON.stringify(await h.session(id));
      for (const epoch of [0, 1, 2]) expect(stored).not.toContain(deriveSandboxKey(TEST_MASTER_KEY, id, epoch));
    }
  });

  it("a sandbox that comes back with its processes (memory snapshot) keeps its key epoch: its sidecar still holds that key", async () => {
    await h.close();
    await setup({ supportsMemorySnapshot: true });
    const s = await runningSession();
    await h.run("pause", s.id);
    expect((await h.session(s.id)).snapshotId).toMatch(/^mem:/);
    await h.run("ensure-runtime", s.id);
    expect(inner.createCalls.map((c) => c.envVars.SIDECAR_TOKEN)).toEqual([deriveSandboxKey(TEST_MASTER_KEY, s.id, 1), deriveSandboxKey(TEST_MASTER_KEY, s.id, 1)]);
    expect((await h.session(s.id)).sandboxKeyEpoch).toBe(1);
  });

  it("10 concurrent resume requests for one paused session produce exactly one sandbox", async () => {
    const s = await runningSession();
    await h.run("pause", s.id);
    expect(inner.live()).toEqual([]);
    const held = provider.hold("ensureSandbox");
    const starts = Array.from({ length: 10 }, () => h.start("ensure-runtime", s.id, "user:u"));
    await held.reached;
    // More requests arrive while the first one is provisioning.
    const late = Array.from({ length: 10 }, () => h.start("ensure-runtime", s.id, "user:u"));
    held.release();
    const results = [...(await Promise.all(starts)), ...(await Promise.all(late))];
    await h.runner.whenIdle();
    expect(results.filter((r) => r.started).length).toBeLessThanOrEqual(2);
    expect(provider.callsOf("ensureSandbox")).toHaveLength(2); // the first provision, and this resume
    const after = await expectConsistent(s.id);
    expect(after.status).toBe("running");
    expect(inner.sandbox(after.sandboxId ?? "")?.restoredFrom).toBe(after.snapshotId);
  });

  it("retries a transient provider failure (ASL Retry) and succeeds", async () => {
    const s = await h.createSession();
    provider.failNext("ensureSandbox", new ProviderError("local", "ensureSandbox", "503 from provider", { retryable: true }), 2);
    const after = await h.run("ensure-runtime", s.id);
    expect(after.status).toBe("running");
    expect(provider.callsOf("ensureSandbox")).toHaveLength(3);
    await expectConsistent(s.id);
  });

  it("a provider failure ends in error with the lease released, and the next resume succeeds", async () => {
    const s = await h.createSession();
    const client = await h.addClient(s.id);
    provider.failNext("ensureSandbox", new ProviderError("local", "ensureSandbox", "quota exceeded", { retryable: false }));
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed.status).toBe("error");
    expect(failed.errorMessage).toContain("quota exceeded");
    expect(h.push.statuses(client)).toEqual(["creating", "error"]);
    await expectConsistent(s.id);
    const retried = await h.run("ensure-runtime", s.id);
    expect(retried.status).toBe("running");
    await expectConsistent(s.id);
    expect((await events(s.id)).map((e) => [e.outcome, e.to])).toEqual([
      ["failed", "error"],
      ["committed", "running"],
    ]);
  });

  it("a crash after the provider created the sandbox: the Catch path terminates it, and the next resume starts exactly one", async () => {
    const s = await h.createSession();
    provider.crashAfter("ensureSandbox");
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed.status).toBe("error");
    // The provision step died after the create (its result never reached the flow): the sandbox it
    // left behind is terminated before the failure is recorded, not left to the sweeper.
    const created = provider.callsOf("ensureSandbox").length;
    expect(created).toBe(1);
    expect(inner.live()).toEqual([]);
    expect(provider.callsOf("terminate")).toHaveLength(1);
    const after = await h.run("ensure-runtime", s.id);
    expect(after.status).toBe("running");
    expect(inner.live()).toEqual([after.sandboxId]);
    // The first attempt's epoch was never committed: the sandbox that is runs with epoch 1's key.
    expect(inner.createCalls.at(-1)?.envVars.SIDECAR_TOKEN).toBe(deriveSandboxKey(TEST_MASTER_KEY, s.id, 1));
    expect(after.sandboxKeyEpoch).toBe(1);
    await expectConsistent(s.id);
  });

  it("an agent failure after a new sandbox exists terminates that sandbox before failing", async () => {
    const s = await h.createSession();
    const failing = Object.assign(Object.create(agent) as ScriptedAgent, {
      ensureSession: () => Promise.reject(new ProviderError("local", "agent", "agent never came up", { retryable: false })),
    });
    h.deps.agent = failing;
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed.status).toBe("error");
    expect(inner.live()).toEqual([]);
    expect(provider.callsOf("terminate")).toHaveLength(1);
  });

  it("seed 002 verification 10: a memory snapshot that cannot be restored clears the snapshot: error now, a fresh start next time (§5c)", async () => {
    const s = await runningSession();
    await h.run("pause", s.id);
    const paused = await h.deps.sessions.getSession(s.id);
    if (!paused) throw new Error("no session");
    await h.deps.sessions.update(paused, { snapshotId: "mem:gone" }, new Date());
    provider.failNext("ensureSandbox", new ProviderError("modal", "restoreFromMemorySnapshot", "snapshot expired", { retryable: false }));
    const watcher = await h.addClient(s.id);
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed).toMatchObject({ status: "error", snapshotId: null });
    expect(failed.errorMessage).toMatch(/^Session reset: the previous conversation was cleared/);
    // The user is told, not just the record (seed 002 Known Limitations 5).
    expect(h.push.sent.filter((m) => m.connectionId === watcher && m.message.type === "status").map((m) => [m.message.status, String(m.message.message ?? "")])).toContainEqual([
      "error",
      failed.errorMessage,
    ]);
    const fresh = await h.run("ensure-runtime", s.id);
    expect(fresh.status).toBe("running");
    expect(inner.sandbox(fresh.sandboxId ?? "")?.restoredFrom).toBeNull();
  });
});

describe("pause, snapshot, stop", () => {
  it("pause: snapshot, terminate, paused with pauseReason user; expiry cancelled", async () => {
    const s = await runningSession(1);
    const after = await h.run("pause", s.id, "user:u", "user");
    expect(after).toMatchObject({ status: "paused", pauseReason: "user", sandboxId: null });
    expect(after.snapshotId).toMatch(/^isnap_/);
    expect(after.activeSeconds).toBeGreaterThan(0);
    expect(h.scheduler.pending()).toEqual([]);
    await expectConsistent(s.id);
  });

  it("pause on a provider with native pause keeps the paused sandbox id (seed 002 §5b) and resumes it", async () => {
    await h.close();
    await setup({ supportsPause: true });
    const s = await runningSession();
    const paused = await h.run("pause", s.id);
    expect(paused).toMatchObject({ status: "paused", sandboxId: s.sandboxId, snapshotId: s.sandboxId });
    expect(provider.callsOf("terminate")).toEqual([]);
    const resumed = await h.run("ensure-runtime", s.id);
    expect(resumed).toMatchObject({ status: "running", sandboxId: s.sandboxId });
  });

  it("a failed pause leaves the session running on its sandbox and tells clients", async () => {
    const s = await runningSession();
    const client = await h.addClient(s.id);
    provider.failNext("snapshot", new ProviderError("local", "snapshot", "disk full", { retryable: false }));
    const after = await h.run("pause", s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(h.push.sent.filter((m) => m.connectionId === client).map((m) => m.message)).toContainEqual(expect.objectContaining({ type: "error", code: "pause_failed" }));
    await expectConsistent(s.id);
  });

  it("a terminate failure keeps the sandbox id on the paused session for the sweeper", async () => {
    const s = await runningSession();
    provider.failNext("terminate", new ProviderError("local", "terminate", "timeout", { retryable: true }));
    const after = await h.run("pause", s.id);
    expect(after).toMatchObject({ status: "paused", sandboxId: s.sandboxId });
  });

  it("snapshot keeps the session running on the same sandbox and records the snapshot", async () => {
    const s = await runningSession();
    const after = await h.run("snapshot", s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(after.snapshotId).toMatch(/^isnap_/);
    await expectConsistent(s.id);
  });

  it("stop terminates and ends the session; a second stop finds nothing to do", async () => {
    const s = await runningSession();
    const after = await h.run("stop", s.id);
    expect(after).toMatchObject({ status: "stopped", sandboxId: null, stopReason: "user" });
    expect(after.endedAt).toBeTruthy();
    await expectConsistent(s.id);
    await h.run("stop", s.id);
    expect((await events(s.id)).map((e) => e.outcome)).toEqual(["committed", "committed", "skipped"]);
  });

  it("flows with nothing to do skip: pause of a paused session, resume of a running one", async () => {
    const s = await runningSession();
    await h.run("ensure-runtime", s.id);
    await h.run("pause", s.id);
    await h.run("pause", s.id);
    expect((await events(s.id)).map((e) => `${e.flow}:${e.outcome}`)).toEqual(["ensure-runtime:committed", "ensure-runtime:skipped", "pause:committed", "pause:skipped"]);
    expect(provider.callsOf("ensureSandbox")).toHaveLength(1);
  });
});

describe("races", () => {
  it("a pause racing a resume ends in one consistent state with no unreferenced sandbox", async () => {
    const s = await runningSession();
    await h.run("pause", s.id);
    const held = provider.hold("ensureSandbox");
    await h.start("ensure-runtime", s.id);
    await held.reached;
    await h.start("pause", s.id); // waits on the lease (LeaseBusy retries)
    held.release();
    await h.runner.whenIdle();
    const after = await expectConsistent(s.id);
    expect(after.status).toBe("paused");
  });

  // Seeded: a failure prints its seed, and INTERLEAVINGS_SEED=<seed> replays the same orders.
  const seed = testSeed("INTERLEAVINGS_SEED");
  it("random interleavings of resume, pause, snapshot and stop always converge to a consistent state", async () => {
    onTestFailed(() => {
      console.error(`random interleavings failed with seed ${seed}; replay: INTERLEAVINGS_SEED=${seed} npx vitest run test/flow/lifecycle-flows.test.ts -t "random interleavings"`);
    });
    const random = seededRandom(seed);
    const flows = ["ensure-runtime", "pause", "snapshot", "stop", "ensure-runtime", "pause"] as const;
    for (let round = 0; round < 12; round++) {
      const s = await h.createSession();
      provider.delay("ensureSandbox", round % 3).delay("snapshot", (round + 1) % 3);
      const order = shuffled(flows, random).slice(0, 4);
      // Starts staggered by 0-3 ms vary the interleavings (a scenario input, not a synchronisation).
      await Promise.all(order.map((flow, i) => new Promise((r) => setTimeout(r, i * (round % 4))).then(() => h.start(flow, s.id))));
      await h.runner.whenIdle();
      const live = inner.live().filter((id) => inner.sandbox(id)?.sessionId === s.id);
      const after = await h.session(s.id);
      expect(live.filter((id) => id !== after.sandboxId)).toEqual([]);
      if (after.status === "running") expect(live).toEqual([after.sandboxId]);
      if (after.status === "paused") expect(after.snapshotId).toBeTruthy();
      if (after.status === "stopped") expect(live).toEqual([]);
      expect((await h.deps.sessions.readLease(s.id))?.owner).toBeNull();
    }
  });

  it("a flow whose lease expired mid-operation does not terminate (verification 17) and commits nothing (verification 18)", async () => {
    const s = await runningSession(1);
    // A: a pause that stalls right after its snapshot, past its lease.
    const held = provider.hold("snapshot", "after");
    await h.start("pause", s.id, "slow-pauser");
    await held.reached;
    h.advance((h.config.LEASE_TTL_SECONDS + 1) * 1000);
    // B: an expiry migration (a client is connected) takes the expired lease and moves the session to a new sandbox.
    provider.clear("snapshot");
    const migrated = (await h.run("migrate", s.id, "schedule:expiry")) as SessionRecord;
    expect(migrated.sandboxId).not.toBe(s.sandboxId);
    // A wakes up: its terminate step must see the lost lease and destroy nothing.
    const terminatesBefore = provider.callsOf("terminate").length;
    held.release();
    await h.runner.whenIdle();
    expect(provider.callsOf("terminate")).toHaveLength(terminatesBefore);
    const after = await expectConsistent(s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: migrated.sandboxId, version: migrated.version });
    const pause = (await events(s.id)).find((e) => e.actor === "slow-pauser");
    expect(pause).toMatchObject({ outcome: "superseded" });
  });

  it("a stale commit affects 0 items: the sandbox-id CAS holds even after the destructive step passed its lease check", async () => {
    const s = await runningSession(1);
    // A passes verifyLease in terminate, then stalls inside the provider call.
    const held = provider.hold("terminate");
    await h.start("pause", s.id, "slow-pauser");
    await held.reached;
    h.advance((h.config.LEASE_TTL_SECONDS + 1) * 1000);
    provider.clear("terminate");
    const migrated = await h.run("migrate", s.id, "schedule:expiry");
    held.release();
    await h.runner.whenIdle();
    const after = await expectConsistent(s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: migrated.sandboxId, version: migrated.version });
    expect((await events(s.id)).find((e) => e.actor === "slow-pauser")).toMatchObject({ outcome: "superseded", to: "running" });
  });

  it("a superseded ensure-runtime discards the sandbox it created", async () => {
    const s = await h.createSession();
    const held = provider.hold("ensureSandbox", "after");
    await h.start("ensure-runtime", s.id, "slow");
    await held.reached;
    h.advance((h.config.LEASE_TTL_SECONDS + 1) * 1000);
    provider.clear("ensureSandbox");
    await h.run("stop", s.id);
    held.release();
    await h.runner.whenIdle();
    const after = await expectConsistent(s.id);
    expect(after.status).toBe("stopped");
    expect(inner.live()).toEqual([]);
    expect((await events(s.id)).find((e) => e.actor === "slow")).toMatchObject({ outcome: "superseded" });
  });
});
