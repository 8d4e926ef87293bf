/**
 * Long provider work and the flow lease (issue 13): every step after Begin renews the lease while
 * it runs, so a provision or snapshot slower than LEASE_TTL_SECONDS keeps it (nobody else can take
 * the session mid-operation) and commits; a provision that dies after creating the sandbox leaves
 * no sandbox running (the Catch path terminates it). Real ASL files and steps, local runner;
 * a short lease TTL so that real time passes it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LeaseBusyError } from "../../functions/domain/errors";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

const LEASE_TTL_SECONDS = 0.6;

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let h: FlowHarness;

beforeEach(async () => {
  inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false });
  provider = new FaultInjectingProvider(inner);
  h = await startFlowHarness({ provider, agent: new ScriptedAgent(), env: { LEASE_TTL_SECONDS: String(LEASE_TTL_SECONDS) } });
});
afterEach(async () => {
  await h.close();
});

/** Lets real time pass (the lease's clock is the flows' clock, which is real time here). */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("long steps keep the flow lease", () => {
  it("a provision that outlasts the lease TTL keeps the lease (an intruder is refused) and commits", async () => {
    const s = await h.createSession();
    const held = provider.hold("ensureSandbox");
    await h.start("ensure-runtime", s.id);
    await held.reached;
    await sleep(LEASE_TTL_SECONDS * 1000 * 3);
    // Without the heartbeat the lease would have expired and this would take it.
    await expect(h.deps.sessions.acquireLease(s.id, "intruder", h.deps.now(), 60)).rejects.toBeInstanceOf(LeaseBusyError);
    held.release();
    await h.runner.whenIdle();
    expect(await h.session(s.id)).toMatchObject({ status: "running" });
    expect(inner.live()).toHaveLength(1);
  });

  it("a snapshot that outlasts the lease TTL keeps the lease and the pause commits", async () => {
    const s = await h.createSession();
    await h.run("ensure-runtime", s.id);
    const held = provider.hold("snapshot");
    await h.start("pause", s.id);
    await held.reached;
    await sleep(LEASE_TTL_SECONDS * 1000 * 3);
    await expect(h.deps.sessions.acquireLease(s.id, "intruder", h.deps.now(), 60)).rejects.toBeInstanceOf(LeaseBusyError);
    held.release();
    await h.runner.whenIdle();
    expect(await h.session(s.id)).toMatchObject({ status: "paused", pauseReason: "user" });
    expect(inner.live()).toEqual([]);
  });
});

describe("a provision that fails after creating the sandbox", () => {
  it("ensure-runtime: the sandbox is terminated in the Catch path and the session is in error", async () => {
    const s = await h.createSession();
    provider.crashAfter("ensureSandbox");
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed.status).toBe("error");
    expect(provider.callsOf("ensureSandbox")).toHaveLength(1);
    expect(inner.live()).toEqual([]);
    expect((await h.deps.sessions.readLease(s.id))?.owner).toBeNull();
  });

  it("migrate: the new sandbox is terminated in the Catch path and the session pauses on its snapshot", async () => {
    const s = await h.createSession();
    await h.run("ensure-runtime", s.id);
    await h.addClient(s.id);
    provider.crashAfter("createSandbox");
    const failed = await h.run("migrate", s.id, "schedule:expiry");
    expect(failed).toMatchObject({ status: "paused", pauseReason: "migration_failed" });
    expect(provider.callsOf("createSandbox")).toHaveLength(1);
    expect(inner.live()).toEqual([]);
  });
});
