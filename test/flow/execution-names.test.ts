/**
 * Execution names and closed executions (issue 13): a request whose deterministic name belongs
 * to an execution that already ended (Begin out of LeaseBusy retries ends SUCCEEDED through
 * Finish, having done nothing) must start a new execution, not silently join the dead one; a
 * request while that execution runs still joins it. The real ASL files and steps, local runner.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let h: FlowHarness;

beforeEach(async () => {
  inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false });
  provider = new FaultInjectingProvider(inner);
  h = await startFlowHarness({ provider, agent: new ScriptedAgent() });
});
afterEach(async () => {
  await h.close();
});

describe("execution names at one fence", () => {
  it("a pause whose Begin exhausted its LeaseBusy retries does not swallow the next pause at the same fence", async () => {
    const s = await h.createSession();
    await h.run("ensure-runtime", s.id);
    // Another owner holds the lease for longer than Begin retries.
    const foreign = await h.deps.sessions.acquireLease(s.id, "someone-else", new Date(), 3600);
    const gaveUp = await h.start("pause", s.id);
    await h.runner.executions.get(gaveUp.executionName)?.done;
    expect(h.runner.executions.get(gaveUp.executionName)?.status).toBe("succeeded");
    expect((await h.session(s.id)).status).toBe("running");

    // The lease is free again, and the fence has not moved: the same request names the same work.
    await h.deps.sessions.releaseLease(foreign);
    expect((await h.deps.sessions.readLease(s.id))?.fence).toBe(foreign.fence);
    const again = await h.start("pause", s.id);
    expect(again).toEqual({ executionName: `${gaveUp.executionName}-r1`, started: true });
    await h.runner.executions.get(again.executionName)?.done;
    expect((await h.session(s.id)).status).toBe("paused");
  });

  it("a request while the execution under the name runs joins it", async () => {
    const s = await h.createSession();
    const held = provider.hold("ensureSandbox");
    // The API reads the fence before starting; Begin bumps it, so both requests read the same one.
    const request = { flow: "ensure-runtime" as const, sessionId: s.id, generation: (await h.deps.sessions.readLease(s.id))?.fence ?? 0, actor: "test" };
    const first = await h.runner.start(request);
    await held.reached;
    const second = await h.runner.start(request);
    expect(second).toEqual({ executionName: first.executionName, started: false });
    held.release();
    await h.runner.whenIdle();
    expect(inner.live()).toHaveLength(1);
    expect(h.runner.executions.size).toBe(1);
  });
});
