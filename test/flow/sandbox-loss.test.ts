/**
 * Issue 25 §5 and §7 through the real ASL and step functions over dynalite, on the instant
 * provider behind the fault-injecting one:
 * - a dead sandbox is noticed by the relay (its stream fails, the reconnect fails; or its stream
 *   goes silent past the heartbeat timeout) and the session is paused on its last snapshot,
 *   `sandbox_lost`, with no sweeper involved; a stream that fails while the sandbox lives changes
 *   nothing;
 * - a user pause of a sandbox that already exited ends paused on the last snapshot (stopped if
 *   there is none), not `running` until the sweeper;
 * - the relay loses its lease before a user pause terminates the sandbox;
 * - a migration whose old sandbox cannot be terminated keeps the snapshot it took and re-arms
 *   the expiry schedule.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import type { SessionRecord } from "../../functions/domain/session";
import { StreamingRelay } from "../../functions/relay/relay";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { FakeOpenCode } from "../support/fake-opencode";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { waitFor } from "../support/wait-for";

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let agent: FakeOpenCode;
let h: FlowHarness;
let relay: StreamingRelay | null = null;

async function setup(options: { capability?: "memory" | "filesystem"; env?: Record<string, string> } = {}): Promise<void> {
  inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: (options.capability ?? "memory") === "memory" });
  provider = new FaultInjectingProvider(inner);
  agent = new FakeOpenCode();
  h = await startFlowHarness({ provider, agent, env: { IDLE_SNAPSHOT_DELAY_SECONDS: "600", MIGRATION_TURN_WAIT_SECONDS: "0.3", ...options.env } });
}

afterEach(async () => {
  await relay?.kill();
  relay = null;
  await h.close();
});

function startRelay(options: { backoffMs?: number[]; heartbeatTimeoutMs?: number } = {}): StreamingRelay {
  h.setRelayWatched("store");
  const transcript = new DynamoTranscriptStore(h.table.doc, h.table.tableName);
  // Leases far longer than the test, so only the flows take a session away from it.
  relay = new StreamingRelay(
    { ...h.deps, relayLeases: h.relayLeases, transcript, agentMessages: agent },
    { ownerId: "relay-a", leaseTtlSeconds: 3600, scanIntervalMs: 50, backoffMs: options.backoffMs ?? [100], ...(options.heartbeatTimeoutMs ? { heartbeatTimeoutMs: options.heartbeatTimeoutMs } : {}) },
  );
  relay.start();
  return relay;
}

async function runningSession(options: { snapshot?: boolean } = {}): Promise<SessionRecord> {
  const s = await h.createSession({ clientType: "web" });
  await h.run("ensure-runtime", s.id);
  return options.snapshot ? h.run("snapshot", s.id) : h.session(s.id);
}

async function lifecycle(sessionId: string) {
  return (await h.deps.events.list(sessionId, { limit: 50 })).items;
}

describe("a sandbox that dies under a running session (issue 25 §5)", () => {
  it("the relay's stream fails, the reconnect fails, the provider says it is gone: paused on the last snapshot (sandbox_lost), no sweeper", async () => {
    await setup();
    const r = startRelay();
    const s = await runningSession({ snapshot: true });
    await waitFor(() => Promise.resolve(agent.subscriberCount()), { until: (n) => n === 1, message: "the relay streaming" });
    inner.kill(s.sandboxId ?? "");
    agent.unreachable = true;
    agent.dropStreams();
    const paused = await waitFor(() => h.session(s.id), { until: (x) => x.status === "paused", message: "the lost sandbox noticed", timeoutMs: 30_000 });
    expect(paused).toMatchObject({ pauseReason: "sandbox_lost", snapshotId: s.snapshotId, sandboxId: null });
    await h.runner.whenIdle();
    const lost = (await lifecycle(s.id)).find((e) => e.flow === "idle-snapshot" && e.outcome === "committed");
    expect(lost).toMatchObject({ actor: "relay:relay-a", reason: "sandbox_lost", to: "paused" });
    // The relay lets go once the session is no longer running.
    await waitFor(() => Promise.resolve(r.heldSessions()), { until: (held) => !held.includes(s.id), message: "the relay letting go" });
  });

  it("a stream that goes silent (the sandbox gone behind an open connection) is declared dead at the heartbeat timeout and the loss check starts at once", async () => {
    await setup();
    // OpenCode's heartbeats, scaled down with the timeout; no reconnect within the test, so only
    // the first (silent) failure can start the check.
    agent.heartbeatEveryMs = 50;
    const r = startRelay({ heartbeatTimeoutMs: 500, backoffMs: [600_000] });
    const s = await runningSession({ snapshot: true });
    await waitFor(() => Promise.resolve(agent.subscriberCount()), { until: (n) => n === 1, message: "the relay streaming" });
    // Heartbeats keep the quiet stream open.
    await waitFor(() => Promise.resolve(r.streamCounters().events), { until: (n) => n >= 15, message: "heartbeats arriving" });
    expect(r.streamCounters()).toMatchObject({ heartbeatTimeouts: 0, disconnects: 0 });
    inner.kill(s.sandboxId ?? "");
    agent.silent = true;
    const paused = await waitFor(() => h.session(s.id), { until: (x) => x.status === "paused", message: "the silent stream noticed", timeoutMs: 30_000 });
    expect(paused).toMatchObject({ pauseReason: "sandbox_lost", snapshotId: s.snapshotId, sandboxId: null });
    await h.runner.whenIdle();
    const lost = (await lifecycle(s.id)).find((e) => e.flow === "idle-snapshot" && e.outcome === "committed");
    expect(lost).toMatchObject({ actor: "relay:relay-a", reason: "sandbox_lost", to: "paused" });
  });

  it("without any snapshot the session is stopped (sandbox_lost) with a message, never left running", async () => {
    await setup();
    startRelay();
    const s = await runningSession();
    await waitFor(() => Promise.resolve(agent.subscriberCount()), { until: (n) => n === 1, message: "the relay streaming" });
    inner.kill(s.sandboxId ?? "");
    agent.unreachable = true;
    agent.dropStreams();
    const stopped = await waitFor(() => h.session(s.id), { until: (x) => x.status !== "running", message: "the lost sandbox noticed", timeoutMs: 30_000 });
    expect(stopped).toMatchObject({ status: "stopped", stopReason: "sandbox_lost", sandboxId: null, errorMessage: expect.stringMatching(/no snapshot/) });
  });

  it("a stream that fails while the sandbox lives (OpenCode restarting) changes nothing: the check stands down, the relay reconnects", async () => {
    await setup();
    const r = startRelay();
    const s = await runningSession({ snapshot: true });
    await waitFor(() => Promise.resolve(agent.subscriberCount()), { until: (n) => n === 1, message: "the relay streaming" });
    agent.unreachable = true;
    agent.dropStreams();
    const check = await waitFor(async () => (await lifecycle(s.id)).find((e) => e.flow === "idle-snapshot" && e.reason === "sandbox_lost") ?? null, {
      until: (e) => e !== null,
      message: "the liveness check to run",
    });
    expect(check).toMatchObject({ outcome: "skipped", actor: "relay:relay-a" });
    agent.unreachable = false;
    await waitFor(() => Promise.resolve(agent.subscriberCount()), { until: (n) => n === 1, message: "the relay streaming again" });
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(r.heldSessions()).toContain(s.id);
    expect(inner.live()).toEqual([s.sandboxId]);
  });

  it("a single dropped stream that reconnects at once is no news: no check runs", async () => {
    await setup();
    startRelay();
    const s = await runningSession();
    await waitFor(() => Promise.resolve(agent.subscriberCount()), { until: (n) => n === 1, message: "the relay streaming" });
    const before = relay?.streamCounters().connects ?? 0;
    agent.dropStreams();
    await waitFor(() => Promise.resolve(relay?.streamCounters().connects ?? 0), { until: (n) => n > before, message: "the relay reconnected" });
    await h.runner.whenIdle();
    expect([...h.runner.executions.values()].filter((e) => e.input.reason === "sandbox_lost")).toEqual([]);
    expect(await h.session(s.id)).toMatchObject({ status: "running", sandboxId: s.sandboxId });
  });
});

describe("a user pause of a sandbox that already exited (issue 25 §7)", () => {
  it("ends paused on the last snapshot (sandbox_lost), not running until the sweeper", async () => {
    await setup();
    const s = await runningSession({ snapshot: true });
    inner.kill(s.sandboxId ?? "");
    const after = await h.run("pause", s.id, "user:user-a", "user");
    expect(after).toMatchObject({ status: "paused", pauseReason: "sandbox_lost", snapshotId: s.snapshotId, sandboxId: null });
    expect(after.errorMessage).toMatch(/lost/);
    expect(h.push.sent.filter((m) => m.message.type === "error")).toEqual([]);
  });

  it("with no snapshot to pause on: stopped (sandbox_lost)", async () => {
    await setup();
    const s = await runningSession();
    inner.kill(s.sandboxId ?? "");
    expect(await h.run("pause", s.id, "user:user-a", "user")).toMatchObject({ status: "stopped", stopReason: "sandbox_lost", sandboxId: null });
  });

  it("a sandbox that is alive but fails to snapshot still fails the pause (the session stays running on it)", async () => {
    await setup();
    const s = await runningSession({ snapshot: true });
    provider.failNext("memorySnapshot", new ProviderError("local", "memorySnapshot", "quota", { retryable: false }));
    expect(await h.run("pause", s.id, "user:user-a", "user")).toMatchObject({ status: "running", sandboxId: s.sandboxId });
  });
});

describe("the relay and a user pause (issue 25 §7)", () => {
  it("the relay's lease is taken before the sandbox is terminated, and given back after", async () => {
    await setup({ capability: "filesystem" });
    const s = await runningSession();
    const heartbeat = await h.relayLeases.register("relay-a", h.deps.now(), 3600);
    const seen = await h.relayLeases.view(s.id);
    expect(seen && (await h.relayLeases.claim(seen, heartbeat, h.deps.now()))).toMatchObject({ owner: "relay-a" });
    const hold = provider.hold("terminate", "before");
    const { executionName } = await h.start("pause", s.id, "user:user-a", "user");
    await hold.reached;
    // The flow seized the session from the relay before the sandbox goes: the relay's revalidation
    // (its reconnect check reads this view) sees another owner, and cannot claim it back.
    const during = await h.relayLeases.view(s.id);
    expect(during?.relayOwner).not.toBe("relay-a");
    expect(during && (await h.relayLeases.claim(during, heartbeat, h.deps.now()))).toBeNull();
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    expect(await h.session(s.id)).toMatchObject({ status: "paused", pauseReason: "user" });
    expect(await h.relayLeases.watched(s.id, h.deps.now())).toBe(false);
  });
});

describe("an expiry migration whose old sandbox cannot be terminated (issue 25 §7)", () => {
  it("keeps running there with the snapshot it took, and re-arms the expiry schedule", async () => {
    await setup({ capability: "filesystem" });
    const s = await runningSession();
    await h.addClient(s.id);
    provider.failNext("terminate", new ProviderError("local", "terminate", "timeout", { retryable: true }));
    const fired = await makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    expect(fired.started).toMatch(/^migrate-/);
    await h.runner.whenIdle();
    const after = await h.session(s.id);
    expect(after).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(after.snapshotId).toMatch(/^isnap_/);
    expect(provider.callsOf("snapshot")).toHaveLength(1);
    expect(provider.callsOf("createSandbox")).toHaveLength(0);
    const expiry = h.scheduler.pending().find((p) => p.name === `expiry-${s.id}`);
    expect(expiry).toBeDefined();
    const retryInMs = (expiry?.at.getTime() ?? 0) - Date.now();
    expect(retryInMs).toBeGreaterThan(0);
    expect(retryInMs).toBeLessThanOrEqual((h.config.EXPIRY_MIGRATION_LEAD_SECONDS * 1000) / 5);
  });
});
