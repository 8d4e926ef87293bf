/**
 * Flow step `begin`: take the session lease (LeaseBusy makes the ASL retry with backoff),
 * re-read the session under it (seed 002 constraint 14), decide whether there is work to do,
 * and show clients the in-progress status (`creating`, `resuming`, `migrating`).
 */
import { NotFoundError } from "../../domain/errors";
import { readIdleFacts } from "../../idle/idle-check";
import { evaluateIdle, idleModeOf } from "../../idle/idle-predicate";
import { broadcastStatus } from "../../services/broadcast";
import { planFlow } from "../plan";
import { referencedSnapshotIds } from "../../domain/restore-source";
import { flowStep } from "../step";
import { stepEntry } from "../lambda-entry";

export const makeBeginStep = flowStep("begin", async (doc, deps) => {
  const lease = await deps.sessions.acquireLease(doc.sessionId, doc.execution, deps.now(), deps.config.LEASE_TTL_SECONDS);
  const startedAt = deps.now().toISOString();
  try {
    const session = await deps.sessions.getSession(doc.sessionId);
    if (!session) throw new NotFoundError(`session ${doc.sessionId} not found`);
    const connectedClients = doc.flow === "migrate" ? (await deps.connections.listLive(doc.sessionId, deps.now())).length : 0;
    // Idle snapshots re-check the whole predicate from fresh state under the lease (seed 002 constraints 2, 13, 14).
    const facts = doc.flow === "idle-snapshot" ? await readIdleFacts(deps, doc.sessionId, session) : null;
    const idle = facts ? evaluateIdle(facts, idleModeOf(doc.reason), deps.config) : null;
    const plan = planFlow(doc.flow, session, { connectedClients, idle });
    // Constraint 12: take the relay lease before anything is snapshotted. The relay's next
    // renewal fails, so it closes the stream and cancels its reconnects, and no relay claims the
    // session until finish releases it. A user pause terminates the sandbox too, so it does the
    // same (issue 25 §7). A `sandbox_lost` check leaves the relay alone: the sandbox may well be
    // alive (the flow then stands down), and the relay goes on reconnecting to it.
    const seizesRelay = doc.flow === "pause" || (doc.flow === "idle-snapshot" && idleModeOf(doc.reason) !== "sandbox_lost");
    const relayLease = plan.proceed && seizesRelay ? await deps.relayLeases.seize(doc.sessionId, `flow:${doc.execution}`, deps.now(), deps.config.LEASE_TTL_SECONDS) : null;
    if (plan.proceed && plan.progressStatus) {
      await broadcastStatus(deps, doc.sessionId, plan.progressStatus, plan.progressStatus === "migrating" ? "Extending session..." : undefined);
    }
    return {
      lease,
      proceed: plan.proceed,
      skipReason: plan.skipReason,
      branch: plan.branch,
      progressStatus: plan.proceed ? plan.progressStatus : null,
      fromStatus: session.status,
      sandboxId: session.sandboxId,
      snapshotIds: [...referencedSnapshotIds(session)],
      graceExpiresAt: idle ? idle.graceExpiresAt.toISOString() : null,
      sandboxExpiresAt: session.sandboxExpiresAt,
      relayLease,
      startedAt,
    };
  } catch (err) {
    // Nothing else will release it: the Catch path has no lease in the document.
    await deps.sessions.releaseLease(lease);
    throw err;
  }
});

export const handler = stepEntry(makeBeginStep);
