/**
 * Flow step `snapshot` (seed 000 §4, §6, §7; seed 002 §5b step 6): snapshot the sandbox the
 * flow found, with the method `snapshotMethod` picks (native pause, memory, filesystem). The
 * lease is verified first: a flow that lost its lease must not pause a sandbox another flow now
 * owns. A failure leaves the session as it was (the ASL routes it to `record-failure`).
 *
 * Idle snapshots look at the agent itself first (a status read, which never counts as activity:
 * constraint 4). Busy -> `NotIdle`: the flow stands down and changes nothing. Unreachable ->
 * the provider is asked whether the sandbox still exists; if it does not, there is nothing to
 * snapshot and the step reports `lost`, so the commit pauses the session on its last snapshot
 * instead of leaving it `running` on a dead sandbox. Modal idle snapshots are memory snapshots
 * with no filesystem fallback (seed 002 §12): a failed one fails the step.
 */
import { agentEndpoint } from "../../agent/agent-endpoint";
import { NotFoundError } from "../../domain/errors";
import type { SessionRecord } from "../../domain/session";
import { idleModeOf } from "../../idle/idle-predicate";
import type { SandboxProvider } from "../../ports/sandbox-provider";
import type { FlowDeps } from "../flow-deps";
import { snapshotMethod } from "../plan";
import { STEP_ERRORS, StepError } from "../step-errors";
import { assertLeaseHeld, flowStep, leaseOf } from "../step";
import { stepEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";

type AgentState = "busy" | "idle" | "unreachable";

async function probeAgent(deps: FlowDeps, session: SessionRecord): Promise<AgentState> {
  if (!session.openCodeUrl || !session.codingAgentSessionId) return "unreachable";
  // Outside the try: a keyring that cannot be read is a failure of this step, not an unreachable agent.
  const agent = await agentEndpoint(deps.sandboxKeys, session.id, session.openCodeUrl);
  try {
    return (await deps.agent.isBusy(agent, session.codingAgentSessionId)) ? "busy" : "idle";
  } catch {
    return "unreachable";
  }
}

async function sandboxAlive(provider: SandboxProvider, sandboxId: string): Promise<boolean> {
  return (await provider.checkSandboxes([sandboxId])).includes(sandboxId);
}

export const makeSnapshotStep = flowStep("snapshot", async (doc, deps) => {
  const lease = leaseOf(doc);
  const sandboxId = doc.begin?.sandboxId;
  if (!sandboxId) throw new NotFoundError(`session ${doc.sessionId} has no sandbox to snapshot`);
  // The session and the lease check from one read (issue 15); idle snapshots check the lease
  // again after looking at the agent, right before they act.
  const read = await deps.sessions.getSessionWithLease(doc.sessionId);
  if (!read) throw new NotFoundError(`session ${doc.sessionId} not found`);
  const { session } = read;
  assertLeaseHeld(lease, read.lease, deps.now());
  const provider = await deps.provider(session.provider);
  if (doc.flow === "idle-snapshot") {
    const mode = idleModeOf(doc.reason);
    const agent = mode === "sandbox_lost" ? "unreachable" : await probeAgent(deps, session);
    if (agent === "busy") throw new StepError(STEP_ERRORS.notIdle, `session ${session.id}: the agent is busy`);
    if (agent === "unreachable" && !(await sandboxAlive(provider, sandboxId))) {
      await deps.sessions.verifyLease(lease, deps.now());
      return { snapshotId: session.snapshotId, method: "lost" as const };
    }
    if (mode === "sandbox_lost") throw new StepError(STEP_ERRORS.notIdle, `session ${session.id}: sandbox ${sandboxId} is alive`);
  }
  const method = snapshotMethod(doc.flow, doc.begin?.branch ?? null, provider);
  if (doc.flow === "idle-snapshot") await deps.sessions.verifyLease(lease, deps.now());
  const { snapshotId } =
    method === "pause"
      ? await provider.pause(session.id, sandboxId)
      : method === "memory"
        ? await provider.memorySnapshot(session.id, sandboxId)
        : await provider.snapshot(session.id, sandboxId);
  return { snapshotId, method };
});

export const handler = stepEntry(makeSnapshotStep, awsProviders);
