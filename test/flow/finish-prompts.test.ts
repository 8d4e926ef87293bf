/**
 * Issue 15: a flow's Finish looks at the session's prompt queue only when the session has had a
 * prompt (`promptsEnqueued`, set at create and added to by the prompt route's activity write,
 * made after the prompt is stored). A prompt that arrives while a flow holds the lease of a
 * session that never had one is still delivered by that flow's Finish. Real ASL and step
 * functions over dynalite, the fault-injecting provider holding the flow, the scripted agent.
 */
import { afterEach, describe, expect, it } from "vitest";
import { submitPrompt } from "../../functions/services/submit-prompt";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { waitFor } from "../support/wait-for";

let provider: FaultInjectingProvider;
let agent: ScriptedAgent;
let h: FlowHarness;

async function setup(): Promise<void> {
  provider = new FaultInjectingProvider(new InstantSandboxProvider());
  agent = new ScriptedAgent();
  h = await startFlowHarness({ provider, agent });
}

afterEach(async () => {
  await h.close();
});

/** Counts the queued-prompt listings made from here on. */
function countQueueListings(): { count: number } {
  const counter = { count: 0 };
  const list = h.deps.prompts.list.bind(h.deps.prompts);
  h.deps.prompts.list = (sessionId, status) => {
    if (status === "queued") counter.count += 1;
    return list(sessionId, status);
  };
  return counter;
}

describe("Finish and the prompt queue", () => {
  it("a session that never had a prompt: start, pause and resume look at no queue", async () => {
    await setup();
    const s = await h.createSession({ clientType: "web" });
    expect(s.promptsEnqueued).toBe(0);
    const listings = countQueueListings();
    expect((await h.run("ensure-runtime", s.id)).status).toBe("running");
    expect((await h.run("pause", s.id)).status).toBe("paused");
    expect((await h.run("ensure-runtime", s.id)).status).toBe("running");
    expect(listings.count).toBe(0);
  });

  it("a prompt sent while the first start provisions is deferred, then delivered by that flow's Finish", async () => {
    await setup();
    const s = await h.createSession({ clientType: "web" });
    const hold = provider.hold("ensureSandbox", "before");
    const { executionName } = await h.start("ensure-runtime", s.id);
    await hold.reached;
    const submitted = await submitPrompt(h.deps, await h.session(s.id), { content: "first words", source: "user:u" });
    expect(submitted.delivery).toBe("deferred");
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    await waitFor(() => Promise.resolve(agent.prompts.map((p) => p.text)), { until: (t) => t.includes("first words"), message: "the deferred prompt reaching the agent" });
    expect((await h.session(s.id)).promptsEnqueued).toBe(1);
  });

  it("a prompt sent while a pause snapshots wakes the session once the pause commits", async () => {
    await setup();
    const s = await h.createSession({ clientType: "web" });
    await h.run("ensure-runtime", s.id);
    const hold = provider.hold("pause", "before");
    const { executionName } = await h.start("pause", s.id);
    await hold.reached;
    const submitted = await submitPrompt(h.deps, await h.session(s.id), { content: "wait, one more thing", source: "user:u" });
    expect(submitted.delivery).toBe("deferred");
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    await waitFor(() => h.session(s.id), { until: (x) => x.status === "running", message: "the wake the prompt caused" });
    await waitFor(() => Promise.resolve(agent.prompts.map((p) => p.text)), { until: (t) => t.includes("wait, one more thing"), message: "the prompt reaching the agent" });
  });
});
