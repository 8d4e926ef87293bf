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
 *
 * A snapshot that expires (a Modal memory snapshot: 7 days) gets a durable filesystem snapshot
 * taken right after it (issue 22 §3), so a session paused longer still resumes (from the
 * filesystem, processes restarted). Not a fallback: both are required, and if the durable one
 * fails the step fails (the session stays running and the pause is retried), and the memory
 * snapshot just taken is deleted (or queued for the sweeper). Why at pause time rather than by a
 * scheduled conversion before day 7: a conversion would have to restore the memory snapshot into
 * a new sandbox, snapshot it and terminate it (a full sandbox start per long pause, and a
 * restore that can fail exactly when it matters); a filesystem snapshot of the sandbox that is
 * being paused anyway costs one SDK call and its seconds while nobody waits (README "Paused
 * sessions never expire").
 */
import { agentEndpoint } from "../../agent/agent-endpoint";
import { NotFoundError } from "../../domain/errors";
import type { SessionRecord } from "../../domain/session";
import { readIdleFacts } from "../../idle/idle-check";
import { evaluateIdle, idleModeOf } from "../../idle/idle-predicate";
import type { PauseResult, SandboxProvider, SnapshotResult } from "../../ports/sandbox-provider";
import type { FlowDeps } from "../flow-deps";
import type { FlowDocument } from "../flow-document";
import { snapshotMethod } from "../plan";
import { STEP_ERRORS, StepError } from "../step-errors";
import { assertLeaseHeld, flowStep, leaseOf, leaseSurelyHeld } from "../step";
import { stepEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { deleteSnapshotOrRecord } from "../snapshot-retirement";

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
  // again after looking at the agent, right before they act. A user pause or a checkpoint well
  // inside its lease acts on the record Begin's take returned: nothing moves the session's
  // sandbox without the lease, so no read (leaseSurelyHeld).
  const begun = doc.begin?.session;
  const session = await (async () => {
    if (begun && (doc.flow === "pause" || doc.flow === "snapshot") && leaseSurelyHeld(lease, deps.now(), deps.config.LEASE_TTL_SECONDS)) return begun;
    const read = await deps.sessions.getSessionWithLease(doc.sessionId);
    if (!read) throw new NotFoundError(`session ${doc.sessionId} not found`);
    assertLeaseHeld(lease, read.lease, deps.now());
    return read.session;
  })();
  const provider = await deps.provider(session.provider);
  if (doc.flow === "idle-snapshot") {
    const mode = idleModeOf(doc.reason);
    if (mode !== "sandbox_lost") {
      // The last safe point (issue 25 §1): after this the sandbox is snapshotted and goes away.
      // A client, proxy, prompt or touch that arrived since Begin checked makes the flow stand
      // down with the sandbox untouched (seed 002 constraints 2, 3: the grace is part of it).
      const facts = await readIdleFacts(deps, session.id, session);
      const verdict = facts ? evaluateIdle(facts, mode, deps.config) : null;
      if (verdict && !verdict.idle) throw new StepError(STEP_ERRORS.notIdle, `session ${session.id}: not idle any more (${verdict.reason ?? "unknown"})`);
    }
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
  let taken: PauseResult | SnapshotResult;
  try {
    taken =
      method === "pause"
        ? await provider.pause(session.id, sandboxId)
        : method === "memory"
          ? await provider.memorySnapshot(session.id, sandboxId)
          : await provider.snapshot(session.id, sandboxId);
  } catch (err) {
    // Issue 25 §7: a sandbox that already exited cannot be snapshotted. A flow that pauses the
    // session then pauses it on its last snapshot (`lost`) instead of leaving it `running` on a
    // dead sandbox until the sweeper. A liveness check that fails itself proves nothing.
    if (pauses(doc) && !(await sandboxAlive(provider, sandboxId).catch(() => true))) {
      await deps.sessions.verifyLease(lease, deps.now());
      deps.logger.warn("snapshot failed on a sandbox that is gone: pausing on the last snapshot", { sessionId: session.id, sandboxId, snapshotId: session.snapshotId });
      return { snapshotId: session.snapshotId, method: "lost" as const };
    }
    throw err;
  }
  // Issue 22 §3: a snapshot that expires (a Modal memory snapshot) gets a durable filesystem
  // snapshot beside it, so a paused session never silently expires.
  const expiresAt = "expiresAt" in taken ? (taken.expiresAt ?? null) : null;
  if (expiresAt === null || method === "filesystem") return { snapshotId: taken.snapshotId, method, expiresAt };
  try {
    const durable = await provider.snapshot(session.id, sandboxId);
    return { snapshotId: taken.snapshotId, method, expiresAt, durableSnapshotId: durable.snapshotId, durableExpiresAt: durable.expiresAt ?? null };
  } catch (err) {
    await deleteSnapshotOrRecord(deps, provider, { provider: session.provider, snapshotId: taken.snapshotId, sessionId: session.id });
    throw err;
  }
});

/** Flows whose snapshot ends the sandbox's life (the commit pauses the session). */
function pauses(doc: FlowDocument): boolean {
  return doc.flow === "pause" || doc.flow === "idle-snapshot" || (doc.flow === "migrate" && doc.begin?.branch === "pause");
}

export const handler = stepEntry(makeSnapshotStep, awsProviders);
