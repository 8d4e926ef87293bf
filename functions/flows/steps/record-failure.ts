/**
 * Flow step `record-failure`: a provider failure the retries did not fix.
 * - `ensure-runtime` moves the session to `error` with a message the user sees; the next resume
 *   retries. A memory snapshot that cannot be restored is cleared first, so that next resume
 *   starts fresh instead of failing forever (seed 002 §5c: restartable, not terminal). When a
 *   durable filesystem snapshot was taken with it (issue 22 §3), that one becomes the snapshot
 *   instead: the next resume restores the files and the conversation, nothing is reset.
 * - a migration whose old sandbox is already gone (terminated before the new one is created)
 *   pauses the session on the snapshot it took, `pauseReason: "migration_failed"`: resumable,
 *   and `paused` keeps a usable snapshot (ARCHITECTURE.md §4);
 * - a migration whose old sandbox could not be terminated keeps running there, with the snapshot
 *   it took recorded (finish re-arms the expiry schedule to try again);
 * - every other flow leaves the session as it was (still running) and tells clients why.
 */
import { errorForLog } from "../../observability/logger";
import { broadcast, broadcastStatus } from "../../services/broadcast";
import { STEP_ERRORS } from "../step-errors";
import { flowStep, leaseOf } from "../step";

export const makeRecordFailureStep = flowStep("record-failure", async (doc, deps) => {
  const failure = doc.failure ?? { Error: "StepFailed", Cause: "unknown failure" };
  const detail = (failure.Cause ?? failure.Error).slice(0, 500);
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) return {};
  if (doc.flow === "ensure-runtime") {
    const restoreFailed = failure.Error === STEP_ERRORS.restoreFailed;
    const durable = restoreFailed && session.durableSnapshotId && session.durableSnapshotId !== session.snapshotId ? session.durableSnapshotId : null;
    const message = durable
      ? "The saved memory state could not be restored. Connect again to restore the saved files and conversation (running processes restart)."
      : restoreFailed
        ? "Session reset: the previous conversation was cleared (its saved state could not be restored). Connect again to start a fresh sandbox."
        : `Sandbox could not be started: ${detail}`;
    const snapshotChanges = durable
      ? { snapshotId: durable, snapshotExpiresAt: session.durableSnapshotExpiresAt, durableSnapshotId: null, durableSnapshotExpiresAt: null, sandboxId: null }
      : restoreFailed
        ? { snapshotId: null, snapshotExpiresAt: null, durableSnapshotId: null, durableSnapshotExpiresAt: null, sandboxId: null }
        : {};
    try {
      await deps.sessions.transition(
        session,
        "error",
        deps.now(),
        { errorMessage: message, ...snapshotChanges },
        leaseOf(doc),
      );
    } catch (err) {
      // Lease lost or state moved on: a newer actor owns the outcome.
      deps.logger.warn("failure not recorded: session moved on", { sessionId: doc.sessionId, error: errorForLog(err) });
      return {};
    }
    await broadcastStatus(deps, doc.sessionId, "error", message);
    if (session.clientType === "automation" && deps.automationRuns) {
      // An automation run's session could not start: its run ends `failed` now (never failing this step:
      // a run missed here is still ended by its timeout or reconciled at the next firing).
      await deps.automationRuns.sessionFailed(doc.sessionId, message).catch((err: unknown) => deps.logger.error("automation run not ended after its session failed", { sessionId: doc.sessionId, error: errorForLog(err) }));
    }
    return {};
  }
  if (doc.flow === "idle-snapshot") {
    // The session stays running and is retried at the next check; finish trips the circuit
    // breaker once the failures in a row reach the limit (seed 002 §12, verification 19).
    try {
      await deps.sessions.update(session, { idleSnapshotFailures: session.idleSnapshotFailures + 1 }, deps.now(), leaseOf(doc));
    } catch (err) {
      deps.logger.warn("idle snapshot failure not counted: session moved on", { sessionId: doc.sessionId, error: errorForLog(err) });
    }
    return {};
  }
  if (doc.flow === "migrate" && doc.terminate?.terminated && doc.snapshot?.snapshotId) {
    try {
      await deps.sessions.transition(
        session,
        "paused",
        deps.now(),
        {
          snapshotId: doc.snapshot.snapshotId,
          snapshotExpiresAt: doc.snapshot.expiresAt ? new Date(doc.snapshot.expiresAt).toISOString() : null,
          durableSnapshotId: null,
          durableSnapshotExpiresAt: null,
          sandboxId: null,
          openCodeUrl: null,
          sandboxExpiresAt: null,
          pauseReason: "migration_failed",
          errorMessage: `Moving to a new sandbox failed: ${detail}`,
        },
        leaseOf(doc),
      );
    } catch (err) {
      deps.logger.warn("failure not recorded: session moved on", { sessionId: doc.sessionId, error: errorForLog(err) });
      return {};
    }
    await broadcastStatus(deps, doc.sessionId, "paused", "Moving to a new sandbox failed; resume restores the saved state");
    return {};
  }
  if (doc.flow === "migrate" && doc.snapshot?.snapshotId && !doc.terminate?.terminated && session.status === "running" && session.sandboxId === (doc.begin?.sandboxId ?? null)) {
    // Issue 25 §7: the old sandbox could not be terminated, so no new one was created and the
    // session goes on running there. The snapshot it took is kept (the newest resumable state if
    // that sandbox dies before the next attempt); finish re-arms the expiry schedule for it.
    try {
      await deps.sessions.update(session, { snapshotId: doc.snapshot.snapshotId }, deps.now(), leaseOf(doc));
    } catch (err) {
      deps.logger.warn("migration snapshot not kept: session moved on", { sessionId: doc.sessionId, error: errorForLog(err) });
    }
  }
  await broadcast(deps, doc.sessionId, { type: "error", code: `${doc.flow}_failed`, message: `${doc.flow} failed: ${detail}` });
  return {};
});
