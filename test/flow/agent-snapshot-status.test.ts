/**
 * What `save_snapshot` waits on (issue 25 §4): the snapshot flow, run through its real ASL with
 * the real steps over dynalite, records in its audit event the snapshot it committed, and the
 * agent tools' status lookup finds that execution and names the snapshot; pending before.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { agentSnapshotStatus } from "../../functions/agent-tools/agent-tools";
import { executionName } from "../../functions/ports/flow-runner";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

let h: FlowHarness;

beforeEach(async () => {
  h = await startFlowHarness({ provider: new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false }), agent: new ScriptedAgent() });
});
afterEach(async () => {
  await h.close();
});

describe("the snapshot flow's audit event names its snapshot", () => {
  it("committed: the event carries the snapshot id the session now has, and the status lookup returns it", async () => {
    const created = await h.createSession();
    await h.run("ensure-runtime", created.id);
    const lease = await h.deps.sessions.readLease(created.id);
    const execution = executionName({ flow: "snapshot", sessionId: created.id, generation: lease?.fence ?? 0 });
    const session = await h.session(created.id);
    expect(await agentSnapshotStatus(h.deps, session, execution)).toEqual({ execution, status: "pending", snapshotId: null, message: null });

    const after = await h.run("snapshot", created.id);
    expect(after.status).toBe("running");
    expect(after.snapshotId).toBeTruthy();
    const events = (await h.deps.events.list(created.id, { limit: 100 })).items;
    expect(events.find((e) => e.flow === "snapshot")).toMatchObject({ outcome: "committed", snapshotId: after.snapshotId });
    expect(events.find((e) => e.flow === "ensure-runtime")?.snapshotId).toBeNull();
    const status = await agentSnapshotStatus(h.deps, after, (events.find((e) => e.flow === "snapshot")?.execution ?? ""));
    expect(status).toEqual({ execution: expect.stringMatching(/^snapshot-/), status: "committed", snapshotId: after.snapshotId, message: null });
  });
});
