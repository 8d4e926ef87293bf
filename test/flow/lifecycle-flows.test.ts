/**
 * Every lifecycle flow through its real ASL file (local flow runner) with the real step
 * functions over dynalite, on the instant provider wrapped in the fault-injecting provider.
 * Races and faults are staged with the wrapper's holds and failure plans.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let agent: ScriptedAgent;
let h: FlowHarness;

beforeEach(async () => {
  inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false });
  provider = new FaultInjectingProvider(inner);
  agent = new ScriptedAgent();
  h = await startFlowHarness({ provider, agent });
});
afterEach(async () => {
  await h.close();
});

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
    expect(h.scheduler.pending().map((p) => p.name)).toEqual([`expiry-${s.id}`]);
    const { items } = await h.deps.events.list(s.id, { limit: 10 });
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ flow: "ensure-runtime", outcome: "committed", from: "starting", to: "running", actor: "test", sandboxId: after.sandboxId });
    expect(Object.keys(items[0]?.timings ?? {})).toEqual(["begin", "provision", "commit"]);
  });
});
void ProviderError;
