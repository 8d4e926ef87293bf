/**
 * Idle snapshotting (seed 002) through the real `idle-snapshot` ASL and step functions over
 * dynalite, on the instant provider wrapped in the fault-injecting provider. Each test names the
 * seed's verification scenario it covers. Two clocks are used:
 * - "manual": a long grace (60 s); the flows' clock is moved past it and the idle check is run as
 *   the schedule would run it (`runIdleCheck`), so nothing fires on its own;
 * - "live": a sub-second grace and the real local scheduler, for the event-driven path itself.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LeaseLostError, ProviderError } from "../../functions/domain/errors";
import type { SessionRecord } from "../../functions/domain/session";
import { runIdleCheck } from "../../functions/idle/idle-check";
import { scheduleName } from "../../functions/ports/lifecycle-scheduler";
import { METRIC_NAMES } from "../../functions/ports/metrics-sink";
import { sweep } from "../../functions/sweeper/orphan-sweeper";
import { BUILD_MAX_RUNNING_SECONDS } from "../../functions/builds/build-sandbox";
import { newBuildId } from "../../functions/builds/build-start";
import { submitPrompt } from "../../functions/services/submit-prompt";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { waitFor } from "../support/wait-for";
import { FakeOpenCode } from "../support/fake-opencode";
import { StreamingRelay } from "../../functions/relay/relay";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let agent: ScriptedAgent;
let h: FlowHarness;

type Capability = "memory" | "pause" | "filesystem";

async function setup(options: { capability?: Capability; env?: Record<string, string> } = {}): Promise<void> {
  const capability = options.capability ?? "memory";
  inner = new InstantSandboxProvider({ supportsPause: capability === "pause", supportsMemorySnapshot: capability === "memory" });
  provider = new FaultInjectingProvider(inner);
  agent = new ScriptedAgent();
  h = await startFlowHarness({
    provider,
    agent,
    env: { IDLE_SNAPSHOT_DELAY_SECONDS: "60", AUTOMATION_IDLE_GRACE_SECONDS: "30", IDLE_SNAPSHOT_RETRY_SECONDS: "30", ORPHAN_SANDBOX_MIN_AGE_SECONDS: "0", ...options.env },
  });
}

afterEach(async () => {
  await h.close();
});

async function runningSession(overrides: Partial<SessionRecord> = {}): Promise<SessionRecord> {
  const s = await h.createSession(overrides);
  await h.run("ensure-runtime", s.id);
  return h.session(s.id);
}

/** The idle check as the schedule runs it, then the execution it started (if any) to its end. */
async function idleCheck(sessionId: string) {
  const result = await runIdleCheck(h.deps, { sessionId, at: h.deps.now() });
  if (result.started) await h.runner.executions.get(result.started)?.done;
  return result;
}

async function idleEvents(sessionId: string) {
  return (await h.deps.events.list(sessionId, { limit: 100 })).items.filter((e) => e.flow === "idle-snapshot");
}

const GRACE_MS = 61_000;

/**
 * An idle snapshot held right after `op` did its work while its lease expires and an intruder
 * takes the session; `finish` lets the stale flow run to its end.
 */
async function leaseLostDuring(op: "memorySnapshot" | "terminate") {
  await setup();
  const s = await runningSession();
  const hold = provider.hold(op, "after");
  h.advance(GRACE_MS);
  const check = await runIdleCheck(h.deps, { sessionId: s.id, at: h.deps.now() });
  await hold.reached;
  h.advance(h.config.LEASE_TTL_SECONDS * 1000 + 1000);
  const intruder = await h.deps.sessions.acquireLease(s.id, "intruder", h.deps.now(), 600);
  const finish = async () => {
    hold.release();
    await h.runner.executions.get(check.started ?? "")?.done;
  };
  return { s, intruder, finish };
}

describe("the idle trigger and the snapshot by capability", () => {
  it("verification 3: no clients, agent idle, grace elapsed: paused, inactivity, mem: snapshot, no sandbox, no endedAt (Modal)", async () => {
    await setup({ capability: "memory" });
    const s = await runningSession();
    h.advance(GRACE_MS);
    const check = await idleCheck(s.id);
    expect(check.verdict?.idle).toBe(true);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "inactivity", sandboxId: null, endedAt: null, lastKnownAgentIdleAt: null });
    expect(after.snapshotId).toMatch(/^mem:/);
    expect(inner.live()).toEqual([]);
    expect(provider.callsOf("snapshot")).toEqual([]);
    // Constraint 7: no expiry and no idle check left for a session without a sandbox.
    expect(h.scheduler.pending().filter((p) => p.name.endsWith(s.id))).toEqual([]);
    expect((await idleEvents(s.id)).map((e) => [e.outcome, e.from, e.to, e.reason])).toEqual([["committed", "running", "paused", "inactivity"]]);
    expect(h.metrics.values(METRIC_NAMES.idleSnapshots)).toEqual([1]);
    expect(h.metrics.values(METRIC_NAMES.idleLag)).toHaveLength(1);
    expect(h.metrics.values(METRIC_NAMES.idleSecondsAvoided)[0]).toBeGreaterThan(3000);
    // Issue 19: avoided seconds by provider; the resume from the mem: snapshot is a memory start.
    expect(h.metrics.recorded.find((m) => m.name === METRIC_NAMES.idleSecondsAvoided)?.dimensions).toEqual({ Provider: inner.type });
    await h.run("ensure-runtime", s.id);
    expect(h.metrics.recorded.filter((m) => m.name === METRIC_NAMES.timeToRunning).map((m) => m.dimensions.StartKind)).toEqual(["fresh", "memory"]);
  });

  it("E2B: native pause, the paused sandbox stays referenced and is resumed under its own id (seed 002 §5b)", async () => {
    await setup({ capability: "pause" });
    const s = await runningSession();
    h.advance(GRACE_MS);
    await idleCheck(s.id);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "inactivity", sandboxId: s.sandboxId, snapshotId: s.sandboxId });
    expect(provider.callsOf("terminate")).toEqual([]);
    const resumed = await h.run("ensure-runtime", s.id);
    expect(resumed).toMatchObject({ status: "running", sandboxId: s.sandboxId, pauseReason: null });
    // Issue 19: a resume from the native pause is a memory start.
    expect(h.metrics.recorded.filter((m) => m.name === "TimeToRunning").map((m) => m.dimensions.StartKind)).toEqual(["fresh", "memory"]);
  });

  it("local: a filesystem snapshot, then terminate", async () => {
    await setup({ capability: "filesystem" });
    const s = await runningSession();
    h.advance(GRACE_MS);
    await idleCheck(s.id);
    expect(await h.session(s.id)).toMatchObject({ status: "paused", sandboxId: null });
    expect(provider.callsOf("snapshot")).toHaveLength(1);
    expect(provider.callsOf("terminate")).toHaveLength(1);
  });

  it("the event-driven path: resumed with nobody connected, the armed check fires at grace expiry and snapshots (no polling)", async () => {
    await setup({ env: { IDLE_SNAPSHOT_DELAY_SECONDS: "0.4" } });
    const s = await runningSession();
    const armed = h.scheduler.pending().find((p) => p.name === `idle-check-${s.id}`);
    expect(armed?.at.getTime()).toBe(Date.parse(s.lastActivityAt) + 400);
    const [event] = await waitFor(() => idleEvents(s.id), { until: (e) => e.length > 0, message: "the idle snapshot" });
    expect(event).toMatchObject({ actor: "schedule:idle-check", outcome: "committed", to: "paused" });
    expect((await h.session(s.id)).pauseReason).toBe("inactivity");
  });

  it("an automation session uses the short grace (AUTOMATION_IDLE_GRACE_SECONDS)", async () => {
    await setup();
    const s = await runningSession({ clientType: "automation" });
    h.advance(31_000);
    expect((await idleCheck(s.id)).verdict?.idle).toBe(true);
    expect((await h.session(s.id)).status).toBe("paused");
  });
});

describe("an early idle-check delivery (issue 15: the wait is a Step Functions Wait state, not a sleeping Lambda)", () => {
  /**
   * A running session whose grace (6 s: a margin for a loaded machine, the Wait runs on the real
   * clock) runs out 6 s from now, and the check armed for that moment.
   */
  async function dueSoon(): Promise<{ s: SessionRecord; at: Date }> {
    await setup({ env: { IDLE_SNAPSHOT_DELAY_SECONDS: "6" } });
    const s = await runningSession();
    const touched = new Date();
    await h.deps.sessions.touchActivity(s.id, touched);
    return { s, at: new Date(touched.getTime() + 6000) };
  }

  it("starts idle-snapshot at once with the check's time; the flow's Wait holds Begin until then, and it snapshots", async () => {
    const { s, at } = await dueSoon();
    const check = await runIdleCheck(h.deps, { sessionId: s.id, at });
    expect(check.verdict?.idle).toBe(true);
    const execution = h.runner.executions.get(check.started ?? "");
    // The check did not wait: it handed the time to the flow, whose first state waits for it.
    expect(execution?.input).toMatchObject({ flow: "idle-snapshot", notBefore: at.toISOString() });
    await execution?.done;
    const [event] = await idleEvents(s.id);
    expect(event).toMatchObject({ outcome: "committed", from: "running", to: "paused", reason: "inactivity" });
    expect(Date.parse(event?.at ?? "")).toBeGreaterThanOrEqual(at.getTime());
    expect(await h.session(s.id)).toMatchObject({ status: "paused", pauseReason: "inactivity" });
  });

  it("activity during the wait aborts it: Begin re-checks the predicate under the lease, and the check is re-armed", async () => {
    const { s, at } = await dueSoon();
    const check = await runIdleCheck(h.deps, { sessionId: s.id, at });
    expect(check.started).not.toBeNull();
    // While the flow sits in its Wait state: a prompt, a heartbeat, a proxy request. (Stamped a
    // minute ahead, so the check Finish re-arms cannot fire and snapshot before the test looks.)
    await h.deps.sessions.touchActivity(s.id, new Date(Date.now() + 60_000));
    const execution = h.runner.executions.get(check.started ?? "");
    expect(execution?.status, "the flow is still in its Wait when the activity lands").toBe("running");
    expect(await h.deps.sessions.readLease(s.id)).toMatchObject({ owner: null });
    await execution?.done;
    const [event] = await idleEvents(s.id);
    expect(event).toMatchObject({ outcome: "skipped", reason: "inactivity", message: "not idle: in_grace" });
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    // Finish re-armed the check for the new grace expiry.
    expect(h.scheduler.pending().map((p) => p.name)).toContain(scheduleName({ sessionId: s.id, purpose: "idle-check" }));
  });

  it("a check delivered on time or late starts the flow with no wait", async () => {
    await setup();
    const s = await runningSession();
    h.advance(GRACE_MS);
    const check = await runIdleCheck(h.deps, { sessionId: s.id, at: new Date(h.deps.now().getTime() - 1000) });
    const execution = h.runner.executions.get(check.started ?? "");
    expect(execution?.input.notBefore).toBeUndefined();
    await execution?.done;
    expect(await h.session(s.id)).toMatchObject({ status: "paused" });
  });
});

describe("what keeps a session awake", () => {
  it("verification 6: an open proxy connection (terminal) keeps it running; closing it lets it snapshot", async () => {
    await setup();
    const s = await runningSession();
    const now = h.deps.now();
    await h.deps.proxies.put({ proxyId: "term-1", sessionId: s.id, kind: "terminal", openedAt: now.toISOString(), expiresAt: new Date(now.getTime() + 600_000).toISOString() });
    h.advance(GRACE_MS);
    const check = await idleCheck(s.id);
    expect(check).toMatchObject({ started: null, verdict: { idle: false, reason: "proxy_connected" } });
    expect((await h.session(s.id)).status).toBe("running");
    expect(await h.deps.proxies.remove(s.id, "term-1")).toBe(true);
    expect((await idleCheck(s.id)).verdict?.idle).toBe(true);
    expect((await h.session(s.id)).status).toBe("paused");
  });

  it("a proxy that stopped refreshing its registration no longer keeps the sandbox awake", async () => {
    await setup();
    const s = await runningSession();
    const now = h.deps.now();
    await h.deps.proxies.put({ proxyId: "vscode-1", sessionId: s.id, kind: "editor", openedAt: now.toISOString(), expiresAt: new Date(now.getTime() + 30_000).toISOString() });
    h.advance(GRACE_MS);
    expect((await idleCheck(s.id)).verdict?.idle).toBe(true);
  });

  it("a connected client keeps it running, whatever the grace", async () => {
    await setup();
    const s = await runningSession();
    await h.addClient(s.id);
    h.advance(10 * GRACE_MS);
    expect((await idleCheck(s.id)).verdict?.reason).toBe("clients_connected");
    expect((await h.session(s.id)).status).toBe("running");
  });

  it("verification 20: periodic heartbeats (preview in use, no WebSocket client) keep it running; the check re-arms lazily", async () => {
    await setup();
    const s = await runningSession();
    for (let i = 0; i < 3; i++) {
      h.advance(50_000);
      await h.deps.sessions.touchActivity(s.id, h.deps.now()); // what POST /heartbeat does
    }
    h.advance(20_000);
    const check = await idleCheck(s.id);
    expect(check.verdict?.reason).toBe("in_grace");
    const lastTouch = (await h.session(s.id)).lastActivityAt;
    expect(check.rearmedAt?.toISOString()).toBe(new Date(Date.parse(lastTouch) + 60_000).toISOString());
    expect(h.scheduler.pending().find((p) => p.name === `idle-check-${s.id}`)?.at.toISOString()).toBe(check.rearmedAt?.toISOString());
    expect((await h.session(s.id)).status).toBe("running");
    // Heartbeats stop: the next check at the new expiry snapshots.
    h.advance(41_000);
    expect((await idleCheck(s.id)).verdict?.idle).toBe(true);
    expect((await h.session(s.id)).status).toBe("paused");
  });

  it("a busy agent (as the relay recorded it) keeps it running; agent-busy checks never touch lastActivityAt (constraint 4)", async () => {
    await setup();
    const s = await runningSession();
    await h.deps.sessions.recordAgentState(s.id, s.sandboxId ?? "", { busy: true, at: h.deps.now() });
    h.advance(GRACE_MS);
    expect((await idleCheck(s.id)).verdict?.reason).toBe("agent_busy");
    expect((await h.session(s.id)).lastActivityAt).toBe(s.lastActivityAt);
  });

  it("the flow's own look at the agent: busy although the record says idle -> it stands down and changes nothing", async () => {
    await setup();
    const s = await runningSession();
    agent.setBusy(s.codingAgentSessionId ?? "", true);
    h.advance(GRACE_MS);
    await idleCheck(s.id);
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(provider.callsOf("memorySnapshot")).toEqual([]);
    expect((await idleEvents(s.id)).map((e) => e.outcome)).toEqual(["skipped"]);
    expect(await h.relayLeases.watched(s.id, h.deps.now())).toBe(false); // the relay lease it took is released
  });
});

describe("races", () => {
  it("verification 7: activity that arrives while the idle snapshot waits for the lease aborts it (touch before wait, re-check under the lease)", async () => {
    // The blocker's lease must outlive the grace the clock skips, or the idle snapshot takes it
    // over at once instead of waiting (this only passed by a race while Begin read the session
    // after its lease write; since issue 15 the write returns the session).
    await setup({ env: { LEASE_TTL_SECONDS: "300" } });
    const s = await runningSession();
    const hold = provider.hold("snapshot");
    const blocker = await h.start("snapshot", s.id); // another flow holds the lease
    await hold.reached;
    h.advance(GRACE_MS);
    const check = await runIdleCheck(h.deps, { sessionId: s.id, at: h.deps.now() });
    expect(check.started).not.toBeNull();
    // An HTTP request (resume, prompt, proxy) touches activity before it waits on anything.
    await h.deps.sessions.touchActivity(s.id, h.deps.now());
    hold.release();
    await h.runner.executions.get(blocker.executionName)?.done;
    await h.runner.executions.get(check.started ?? "")?.done;
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    const [idle] = await idleEvents(s.id);
    expect(idle).toMatchObject({ outcome: "skipped", reason: "inactivity" });
    expect(idle?.message).toBe("not idle: in_grace");
    expect(provider.callsOf("memorySnapshot")).toEqual([]);
  });

  it("verification 13: a prompt sent during the snapshot waits for it, then resumes the session from that snapshot and runs", async () => {
    await setup();
    const s = await runningSession();
    const hold = provider.hold("memorySnapshot", "after");
    h.advance(GRACE_MS);
    const check = await runIdleCheck(h.deps, { sessionId: s.id, at: h.deps.now() });
    await hold.reached;
    const submitted = await submitPrompt(h.deps, await h.session(s.id), { content: "are you there?", source: "user:u" });
    expect(submitted.delivery).toBe("deferred");
    hold.release();
    await h.runner.executions.get(check.started ?? "")?.done;
    const resumed = await waitFor(() => h.session(s.id), { until: (x) => x.status === "running" && x.sandboxId !== s.sandboxId, message: "the resume the prompt caused" });
    const snapshotId = (await idleEvents(s.id))[0]?.outcome === "committed" ? inner.sandbox(resumed.sandboxId ?? "")?.restoredFrom : null;
    expect(snapshotId).toMatch(/^mem:/);
    await waitFor(() => Promise.resolve(agent.prompts.map((p) => p.text)), { until: (t) => t.includes("are you there?"), message: "the prompt reaching the agent" });
  });

  it("verification 15: a flow that died mid-snapshot holding the lease: the sweeper waits out the lease, converges to paused, and the dead flow's lease commits nothing", async () => {
    await setup();
    const s = await runningSession();
    // A real idle-snapshot flow takes the lease, snapshots, and dies there (its gateway crashed).
    const dying = provider.hold("memorySnapshot", "after");
    h.advance(GRACE_MS);
    const check = await runIdleCheck(h.deps, { sessionId: s.id, at: h.deps.now() });
    await dying.reached;
    const held = await h.deps.sessions.readLease(s.id);
    expect(held?.owner).toBeTruthy();
    const dead = { sessionId: s.id, owner: held?.owner ?? "", fence: held?.fence ?? -1 };
    const blocked = await sweep(h.deps);
    expect(blocked.started).toEqual([]); // the lease is live: the sweeper leaves the session to its holder
    h.advance(h.config.LEASE_TTL_SECONDS * 1000 + 1000);
    const report = await sweep(h.deps);
    expect(report.started.map((x) => [x.sessionId, x.mode])).toEqual([[s.id, "inactivity"]]);
    await h.runner.executions.get(report.started[0]?.execution ?? "")?.done;
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "inactivity", sandboxId: null });
    expect(inner.live()).toEqual([]);
    // The lease guard itself: a write that is otherwise valid (current version, same status, same
    // sandbox) under the dead flow's lease is refused and changes nothing.
    await expect(h.deps.sessions.update(after, { snapshotId: "stale" }, h.deps.now(), dead)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await h.session(s.id)).toEqual(after);
    // The dead flow comes back to life: it terminates nothing, commits nothing.
    const terminatesBefore = provider.callsOf("terminate").length;
    dying.release();
    await h.runner.executions.get(check.started ?? "")?.done;
    expect(provider.callsOf("terminate")).toHaveLength(terminatesBefore);
    expect(await h.session(s.id)).toEqual(after);
    expect((await idleEvents(s.id)).map((e) => e.outcome).sort()).toEqual(["committed", "superseded"]);
    // The same write under a live lease is accepted: only the lease stopped the dead flow's.
    const live = await h.deps.sessions.acquireLease(s.id, "control", h.deps.now(), h.config.LEASE_TTL_SECONDS);
    await expect(h.deps.sessions.update(after, { snapshotId: "control" }, h.deps.now(), live)).resolves.toMatchObject({ snapshotId: "control" });
    await h.deps.sessions.releaseLease(live);
  });

  it("verification 17: a lease lost mid-snapshot means no terminate and no commit", async () => {
    const { s, intruder, finish } = await leaseLostDuring("memorySnapshot");
    await finish();
    expect(provider.callsOf("terminate")).toEqual([]);
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect((await idleEvents(s.id)).map((e) => e.outcome)).toEqual(["superseded"]);
    await h.deps.sessions.releaseLease(intruder);
  });

  it("verification 18: another actor resumed with a new sandbox while the stale snapshot ran: its commit affects 0 items", async () => {
    const { s, intruder, finish } = await leaseLostDuring("terminate");
    const replacement = await inner.createSandbox({ sessionId: s.id, repos: [], envVars: {} });
    const swapped = await h.deps.sessions.update(await h.session(s.id), { sandboxId: replacement.sandboxId }, h.deps.now(), intruder);
    await finish();
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: replacement.sandboxId, version: swapped.version });
    expect((await idleEvents(s.id)).map((e) => e.outcome)).toEqual(["superseded"]);
    await h.deps.sessions.releaseLease(intruder);
  });
});

describe("failures and the circuit breaker", () => {
  const modalFailure = () => new ProviderError("modal", "memorySnapshot", "snapshot failed: sandbox is executing", { retryable: false });

  it("verification 9: a failed memory snapshot keeps the session running, takes no filesystem fallback, and retries at the next check", async () => {
    await setup({ capability: "memory" });
    const s = await runningSession();
    provider.failNext("memorySnapshot", modalFailure());
    h.advance(GRACE_MS);
    await idleCheck(s.id);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: s.sandboxId, idleSnapshotFailures: 1 });
    expect(provider.callsOf("snapshot")).toEqual([]);
    expect(provider.callsOf("terminate")).toEqual([]);
    const retry = h.scheduler.pending().find((p) => p.name === `idle-check-${s.id}`);
    expect(retry?.at.getTime()).toBeGreaterThanOrEqual(h.deps.now().getTime() + 29_000);
    expect((await idleEvents(s.id)).map((e) => e.outcome)).toEqual(["failed"]);
    // The next check succeeds and resets the count.
    await idleCheck(s.id);
    expect(await h.session(s.id)).toMatchObject({ status: "paused", idleSnapshotFailures: 0 });
  });

  it("verification 19: after 3 failures in a row the circuit breaker stops the session safely, with its reason and an alarm metric", async () => {
    await setup({ capability: "memory" });
    const s = await runningSession();
    provider.failNext("memorySnapshot", modalFailure(), 10);
    h.advance(GRACE_MS);
    for (let i = 1; i <= 2; i++) {
      await idleCheck(s.id);
      expect(await h.session(s.id)).toMatchObject({ status: "running", idleSnapshotFailures: i });
    }
    await idleCheck(s.id);
    const stopped = await waitFor(() => h.session(s.id), { until: (x) => x.status === "stopped", message: "the circuit breaker's stop" });
    expect(stopped).toMatchObject({ stopReason: "idle_snapshot_failed", sandboxId: null });
    expect(provider.callsOf("memorySnapshot")).toHaveLength(3);
    expect(provider.callsOf("snapshot")).toEqual([]);
    expect(inner.live()).toEqual([]);
    expect(h.metrics.values(METRIC_NAMES.circuitBreakerTrips)).toEqual([1]);
    expect(h.metrics.values(METRIC_NAMES.idleSnapshotFailures)).toEqual([1, 1, 1]);
    // The audit event is written by the stop flow's finish, just after its commit.
    const events = await waitFor(() => h.deps.events.list(s.id, { limit: 50 }), { until: (page) => page.items.some((e) => e.flow === "stop"), message: "the stop's audit event" });
    const stop = events.items.find((e) => e.flow === "stop");
    expect(stop).toMatchObject({ actor: "circuit-breaker", reason: "idle_snapshot_failed", outcome: "committed" });
  });
});

describe("SSE and relay", () => {
  it("verification 11: no relay watching but the agent known idle: the snapshot still fires", async () => {
    await setup();
    h.setRelayWatched("store");
    const s = await runningSession();
    await h.deps.sessions.recordAgentState(s.id, s.sandboxId ?? "", { busy: false, at: h.deps.now() });
    h.advance(GRACE_MS);
    expect((await idleCheck(s.id)).verdict?.idle).toBe(true);
    expect((await h.session(s.id)).status).toBe("paused");
  });

  it("no relay and the agent never seen idle: the idle check waits (agent state unknown); the sweeper's orphan path handles it", async () => {
    await setup();
    h.setRelayWatched("store");
    const s = await runningSession();
    h.advance(GRACE_MS);
    expect((await idleCheck(s.id)).verdict?.reason).toBe("agent_state_unknown");
    const report = await sweep(h.deps);
    expect(report.started.map((x) => x.mode)).toEqual(["orphaned"]);
    await h.runner.executions.get(report.started[0]?.execution ?? "")?.done;
    expect(await h.session(s.id)).toMatchObject({ status: "paused", pauseReason: "orphaned" });
    expect(h.metrics.values(METRIC_NAMES.orphansFound)).toEqual([1]);
  });

  it("an orphan whose agent answers busy is left running (the probe decides, never a guess)", async () => {
    await setup();
    h.setRelayWatched("store");
    const s = await runningSession();
    agent.setBusy(s.codingAgentSessionId ?? "", true);
    h.advance(GRACE_MS);
    const report = await sweep(h.deps);
    await h.runner.executions.get(report.started[0]?.execution ?? "")?.done;
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
  });

  it("constraint 12: the idle snapshot takes the session from the relay that watches it, and gives it back when done", async () => {
    await setup({ capability: "pause" });
    h.setRelayWatched("store");
    const s = await runningSession();
    const hb = await h.relayLeases.register("relay-a", h.deps.now(), 3600);
    const seen = await h.relayLeases.view(s.id);
    const relay = seen ? await h.relayLeases.claim(seen, hb, h.deps.now()) : null;
    expect(relay).not.toBeNull();
    await h.deps.sessions.recordAgentState(s.id, s.sandboxId ?? "", { busy: false, at: h.deps.now() });
    h.advance(GRACE_MS);
    await idleCheck(s.id);
    expect((await h.session(s.id)).status).toBe("paused");
    // The relay's claim is gone (seized, then released by finish): its next revalidation drops the stream.
    expect(await h.relayLeases.view(s.id)).toMatchObject({ relayOwner: null });
    expect(await h.relayLeases.watched(s.id, h.deps.now())).toBe(false);
  });
});

describe("verification 16: the reconnect race", () => {
  it("the SSE stream drops, a reconnect is scheduled, an idle snapshot runs meanwhile: the reconnect never undoes it", async () => {
    const fake = new FakeOpenCode();
    inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: true });
    provider = new FaultInjectingProvider(inner);
    h = await startFlowHarness({ provider, agent: fake, env: { IDLE_SNAPSHOT_DELAY_SECONDS: "60" } });
    h.setRelayWatched("store");
    const transcript = new DynamoTranscriptStore(h.table.doc, h.table.tableName);
    // Leases far longer than the test's clock jumps, so only the idle snapshot can take the session away.
    const relay = new StreamingRelay({ ...h.deps, relayLeases: h.relayLeases, transcript, agentMessages: fake }, { ownerId: "relay-a", leaseTtlSeconds: 3600, scanIntervalMs: 50, backoffMs: [300] });
    relay.start();
    try {
      const s = await runningSession();
      await waitFor(() => h.session(s.id), { until: (x) => x.lastKnownAgentIdleAt !== null && fake.subscriberCount() === 1, message: "the relay watching an idle agent" });
      const hold = provider.hold("memorySnapshot");
      fake.dropStreams(); // the reconnect is now scheduled (300 ms)
      h.advance(GRACE_MS);
      const check = await runIdleCheck(h.deps, { sessionId: s.id, at: h.deps.now() });
      await hold.reached;
      // The reconnect comes due while the snapshot is in progress: it revalidates, finds its lease taken, and stands down.
      await waitFor(() => relay.counters.leasesLost === 1, { message: "the reconnect to find its lease taken" });
      // The dropped stream counts as lost (issue 19: RelayStreamsLost, by reason).
      expect(h.metrics.recorded.filter((m) => m.name === "RelayStreamsLost").map((m) => m.dimensions.Reason)).toEqual(["ended"]);
      expect(fake.subscriberCount()).toBe(0);
      expect(relay.heldSessions()).not.toContain(s.id);
      hold.release();
      await h.runner.executions.get(check.started ?? "")?.done;
      expect(await h.session(s.id)).toMatchObject({ status: "paused", sandboxId: null });
      // Several relay scans later: nothing reconnected, claimed or resumed.
      const scanned = relay.counters.scans;
      await waitFor(() => relay.counters.scans >= scanned + 3, { message: "three more relay scans" });
      expect(fake.subscriberCount()).toBe(0);
      expect(relay.heldSessions()).not.toContain(s.id);
      expect(await h.session(s.id)).toMatchObject({ status: "paused", sandboxId: null });
      // The dropped stream also had the relay ask whether the sandbox was lost (issue 25 §5):
      // it was alive, so that check stood down and changed nothing.
      const executions = [...h.runner.executions.values()];
      expect(executions.filter((e) => e.input.reason !== "sandbox_lost").map((e) => e.flow)).toEqual(["ensure-runtime", "idle-snapshot"]);
      const lostChecks = (await idleEvents(s.id)).filter((e) => e.reason === "sandbox_lost");
      expect(lostChecks.map((e) => e.outcome)).toEqual(executions.filter((e) => e.input.reason === "sandbox_lost").map(() => "skipped"));
      expect(inner.live()).toEqual([]);
    } finally {
      await relay.kill();
    }
  });
});

describe("the sweeper", () => {
  it("a sandbox that died under a running session: paused on its last snapshot, the in-flight prompt requeued and run after the resume", async () => {
    await setup();
    const started = await runningSession();
    // A checkpoint to pause on (without one the session is stopped: see the next test).
    const s = await h.run("snapshot", started.id);
    expect(s.snapshotId).toMatch(/^isnap_/);
    await h.addClient(s.id);
    await submitPrompt(h.deps, await h.session(s.id), { content: "build it", source: "user:u" });
    expect((await h.deps.prompts.list(s.id, "processing")).map((p) => p.content)).toEqual(["build it"]);
    inner.kill(s.sandboxId ?? "");
    const report = await sweep(h.deps);
    expect(report.started.map((x) => x.mode)).toEqual(["sandbox_lost"]);
    await h.runner.executions.get(report.started[0]?.execution ?? "")?.done;
    const resumed = await waitFor(() => h.session(s.id), { until: (x) => x.status === "running" && x.sandboxId !== s.sandboxId, message: "the resume for the requeued prompt" });
    expect(resumed.sandboxId).not.toBeNull();
    const lost = (await idleEvents(s.id))[0];
    expect(lost).toMatchObject({ outcome: "committed", to: "paused", reason: "sandbox_lost" });
    expect(inner.sandbox(resumed.sandboxId ?? "")?.restoredFrom).toBe(s.snapshotId);
    await waitFor(() => Promise.resolve(agent.prompts.filter((p) => p.text === "build it").length), { until: (n) => n === 2, message: "the prompt sent again" });
    // Time to running by start kind (issue 19): the first start was fresh, the resume from the filesystem snapshot.
    const starts = h.metrics.recorded.filter((m) => m.name === "TimeToRunning").map((m) => m.dimensions);
    expect(starts).toEqual([
      { Provider: inner.type, StartKind: "fresh" },
      { Provider: inner.type, StartKind: "filesystem" },
    ]);
  });

  it("a sandbox that died before any snapshot: nothing to resume from, so the session is stopped (sandbox_lost) saying so", async () => {
    await setup();
    const s = await runningSession();
    expect(s.snapshotId).toBeNull();
    inner.kill(s.sandboxId ?? "");
    const report = await sweep(h.deps);
    await h.runner.executions.get(report.started[0]?.execution ?? "")?.done;
    expect(await h.session(s.id)).toMatchObject({ status: "stopped", stopReason: "sandbox_lost", sandboxId: null, errorMessage: expect.stringMatching(/no snapshot/) });
  });

  it("terminates a sandbox no session references, and a leftover a stop could not terminate", async () => {
    await setup({ capability: "filesystem" });
    const kept = await runningSession();
    const stray = await inner.createSandbox({ sessionId: kept.id, repos: [], envVars: {} });
    const stoppedSession = await runningSession();
    provider.failNext("terminate", new ProviderError("local", "terminate", "busy", { retryable: false }));
    await h.run("stop", stoppedSession.id);
    expect(await h.session(stoppedSession.id)).toMatchObject({ status: "stopped", sandboxId: stoppedSession.sandboxId });
    const report = await sweep(h.deps);
    expect(report.terminated.map((t) => [t.sandboxId, t.why]).sort()).toEqual(
      [
        [stray.sandboxId, "unreferenced"],
        [stoppedSession.sandboxId, "leftover"],
      ].sort(),
    );
    expect(inner.live()).toEqual([kept.sandboxId]);
    expect((await h.session(stoppedSession.id)).sandboxId).toBeNull();
    expect(h.metrics.values(METRIC_NAMES.orphanSandboxesTerminated)).toEqual([1]);
  });

  it("knows build sandboxes: those of running builds are left alone past the minimum age; those of ended, unknown, overdue builds and earlier attempts are terminated", async () => {
    await setup({ env: { ORPHAN_SANDBOX_MIN_AGE_SECONDS: "600" } });
    const now = new Date().toISOString();
    await h.deps.catalog.createRepo({ id: "repo_s", orgId: "org-a", url: "https://github.com/acme/s.git", defaultBranch: null, credential: null, setupCommands: [], serviceCommands: [], envFiles: [], snapshot: null, latestBuild: null, createdAt: now, updatedAt: now });
    await h.deps.catalog.createPrebuild({ id: "pb_s", orgId: "org-a", name: "s", repos: [{ repoId: "repo_s" }], setupCommands: [], provider: "local", snapshot: null, latestBuild: null, createdAt: now, updatedAt: now });
    const target = { kind: "prebuild" as const, id: "pb_s" };
    let n = 0;
    /** A build as the builder stores it, with a sandbox created for it (its id where a session id would be). */
    const buildWithSandbox = async (options: { startedAt?: Date; recordSandbox?: "own" | "other" | "none"; ended?: boolean; stored?: boolean } = {}) => {
      n += 1;
      const id = newBuildId(new Date(Date.now() + n));
      const sandbox = await inner.createSandbox({ sessionId: id, repos: [], envVars: {} });
      if (options.stored !== false) {
        const startedAt = (options.startedAt ?? new Date()).toISOString();
        await h.deps.catalog.startBuild({ id, orgId: "org-a", target, provider: "local", status: "running", trigger: "manual", startedAt, endedAt: null, snapshotId: null, sandboxId: null, error: null, log: [], timings: {} });
        const recorded = options.recordSandbox ?? "own";
        if (recorded !== "none") await h.deps.catalog.setBuildSandbox("org-a", target, id, recorded === "own" ? sandbox.sandboxId : "isb_a-later-attempt");
        if (options.ended) await h.deps.catalog.finishBuild("org-a", target, id, { status: "succeeded", endedAt: new Date().toISOString(), snapshotId: null, error: null, timings: {} });
      }
      return { id, sandboxId: sandbox.sandboxId };
    };
    const running = await buildWithSandbox();
    const provisioning = await buildWithSandbox({ recordSandbox: "none" });
    const earlierAttempt = await buildWithSandbox({ recordSandbox: "other" });
    const ended = await buildWithSandbox({ ended: true });
    const unknown = await buildWithSandbox({ stored: false });
    const overdue = await buildWithSandbox({ startedAt: new Date(Date.now() - (BUILD_MAX_RUNNING_SECONDS + 60) * 1000) });

    // Young: nothing is touched, whatever its build.
    expect((await sweep(h.deps)).terminated).toEqual([]);

    h.advance(601_000);
    const report = await sweep(h.deps);
    expect(report.terminated.map((t) => [t.sandboxId, t.sessionId, t.why]).sort()).toEqual(
      [earlierAttempt, ended, unknown, overdue].map((b) => [b.sandboxId, b.id, "build_ended"]).sort(),
    );
    expect(inner.live().sort()).toEqual([running.sandboxId, provisioning.sandboxId].sort());
    expect(report.errors).toBe(0);
  });

  it("leaves young sandboxes alone (a flow may be about to commit one)", async () => {
    await setup({ env: { ORPHAN_SANDBOX_MIN_AGE_SECONDS: "600" } });
    const s = await runningSession();
    await inner.createSandbox({ sessionId: s.id, repos: [], envVars: {} });
    const report = await sweep(h.deps);
    expect(report.terminated).toEqual([]);
    expect(inner.live()).toHaveLength(2);
  });
});
