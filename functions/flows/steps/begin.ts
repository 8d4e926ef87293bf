/**
 * Flow step `begin`: take the session lease (LeaseBusy makes the ASL retry with backoff),
 * re-read the session under it (seed 002 constraint 14), decide whether there is work to do,
 * and show clients the in-progress status (`creating`, `resuming`, `migrating`). Nothing to do
 * leaves through `NothingToDo` (a `CarryError`): the ASL goes straight to Finish with the result.
 */
import { readIdleFacts } from "../../idle/idle-check";
import { evaluateIdle, idleModeOf } from "../../idle/idle-predicate";
import { broadcastStatus } from "../../services/broadcast";
import { planFlow, type FlowPlan } from "../plan";
import { admitToRun, isUsageRefusal } from "../../usage/usage-gate";
import type { FlowDocument } from "../flow-document";
import type { AgentModel } from "../../domain/agent-settings";
import type { SessionRecord } from "../../domain/session";
import type { FlowDeps } from "../flow-deps";
import { referencedSnapshotIds } from "../../domain/restore-source";
import { CarryError, STEP_ERRORS } from "../step-errors";
import { isLiveConnection } from "../../domain/connection-liveness";
import type { ClientConnection } from "../../ports/session-items";
import { flowStep } from "../step";
import { stepEntry } from "../lambda-entry";

/**
 * A session about to run (`ensure-runtime` with work to do) must be admitted by its org's limits
 * (API.md "Usage, limits and credits"), whichever door started the flow (resume, a prompt's wake,
 * a client connecting): credits left and a running place taken. Refused, the flow has nothing to
 * do and says why; queued prompts stay stored for when the session may run.
 *
 * A session without its own model boots with its org's: read with the limits in one request and
 * carried to Provision (`orgModel`), which then reads nothing more (issue 15).
 */
async function admitted(doc: FlowDocument, deps: FlowDeps, session: SessionRecord, plan: FlowPlan): Promise<FlowPlan & { orgModel?: AgentModel | null }> {
  if (doc.flow !== "ensure-runtime" || !plan.proceed) return plan;
  try {
    if (session.model) {
      await admitToRun(deps.usage, session, deps.now());
      return plan;
    }
    const { limits, model } = await deps.usage.getLimitsAndModel(session.orgId);
    await admitToRun(deps.usage, session, deps.now(), limits);
    return { ...plan, orgModel: model };
  } catch (err) {
    if (!isUsageRefusal(err)) throw err;
    return { proceed: false, skipReason: `${err.code}: ${err.message}`, progressStatus: null, branch: null };
  }
}

/** At most this many connections ride in the flow document (a Step Functions payload is capped at 256 KB). */
export const MAX_CARRIED_CONNECTIONS = 20;

/**
 * The connections Begin listed, for Finish to push to instead of listing them again: the live
 * ones, when every one of them has had its `init` (a connection that gets it during the flow is
 * marked ready after Begin's listing, and Finish must see that), and there are not too many.
 */
function carriedConnections(listed: readonly ClientConnection[], now: Date): ClientConnection[] | undefined {
  const live = listed.filter((c) => isLiveConnection(c, now));
  if (live.length > MAX_CARRIED_CONNECTIONS || live.some((c) => !c.ready)) return undefined;
  return live;
}

export const makeBeginStep = flowStep("begin", async (doc, deps) => {
  // One write takes the lease and returns the session as it left it: no read after it (issue 15).
  // A user pause seizes the relay in that same write (below: why it seizes at all); it only
  // proceeds on a running session, and one that does not proceed releases the seize in Finish.
  const seizesInTake = doc.flow === "pause";
  const relayOwner = `flow:${doc.execution}`;
  const taken = await deps.sessions.acquireLeaseWithSession(
    doc.sessionId,
    doc.execution,
    deps.now(),
    deps.config.LEASE_TTL_SECONDS,
    seizesInTake ? { seizeRelay: relayOwner } : {},
  );
  const { lease, session } = taken;
  const startedAt = deps.now().toISOString();
  try {
    // One listing of the connections serves the migration's choice, the progress push and, while
    // no client connects meanwhile, Finish's push (issue 15: `carriedConnections`).
    let listed: ClientConnection[] | undefined = doc.flow === "migrate" ? await deps.connections.list(doc.sessionId) : undefined;
    const connectedClients = listed ? listed.filter((c) => isLiveConnection(c, deps.now())).length : 0;
    // Idle snapshots re-check the whole predicate from fresh state under the lease (seed 002 constraints 2, 13, 14).
    const facts = doc.flow === "idle-snapshot" ? await readIdleFacts(deps, doc.sessionId, session) : null;
    const idle = facts ? evaluateIdle(facts, idleModeOf(doc.reason), deps.config) : null;
    const plan = await admitted(doc, deps, session, planFlow(doc.flow, session, { connectedClients, idle }));
    // Constraint 12: take the relay lease before anything is snapshotted. The relay's next
    // renewal fails, so it closes the stream and cancels its reconnects, and no relay claims the
    // session until finish releases it. A user pause terminates the sandbox too, so it does the
    // same (issue 25 §7). A `sandbox_lost` check leaves the relay alone: the sandbox may well be
    // alive (the flow then stands down), and the relay goes on reconnecting to it.
    const seizesRelay = doc.flow === "idle-snapshot" && idleModeOf(doc.reason) !== "sandbox_lost";
    const relayLease =
      taken.relayLease ?? (plan.proceed && seizesRelay ? await deps.relayLeases.seize(doc.sessionId, relayOwner, deps.now(), deps.config.LEASE_TTL_SECONDS) : null);
    if (plan.proceed && plan.progressStatus) {
      listed ??= await deps.connections.list(doc.sessionId);
      await broadcastStatus(deps, doc.sessionId, plan.progressStatus, plan.progressStatus === "migrating" ? "Extending session..." : undefined, { connections: listed });
    }
    const carried = plan.proceed && listed ? carriedConnections(listed, deps.now()) : undefined;
    const result = {
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
      session,
      ...(plan.orgModel !== undefined ? { orgModel: plan.orgModel } : {}),
      ...(carried ? { connections: carried } : {}),
      startedAt,
      // The user pause's execution start (its Begin's Parameters), for the steps after Begin (wake-waiters.ts).
      ...(doc.started ? { executionStartedAt: doc.started.at } : {}),
    };
    // Nothing to do: straight to Finish (which releases the lease), carried through the ASL
    // Catch instead of a Choice state (one billed transition per flow less).
    // (Without the session record: Finish does not need it, and a Cause holds at most 32 KB.)
    if (!plan.proceed) throw new CarryError(STEP_ERRORS.nothingToDo, "begin", { ...result, session: undefined });
    return result;
  } catch (err) {
    if (err instanceof CarryError) throw err;
    // Nothing else will release it: the Catch path has no lease in the document.
    await deps.sessions.releaseLease(lease);
    if (taken.relayLease) await deps.relayLeases.release(taken.relayLease);
    throw err;
  }
});

export const handler = stepEntry(makeBeginStep);
