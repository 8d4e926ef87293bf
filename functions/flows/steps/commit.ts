/**
 * Flow step `commit`: the flow's one lifecycle write, a compare-and-set guarded by the lease
 * (owner + fence) and by the sandbox the flow found. A flow whose lease was taken over, or whose
 * session moved on, affects 0 items and fails with `LeaseLost`/`StaleWrite`; the ASL then
 * discards what the flow created (seed 002 verification 18).
 *
 * Issue 15 (a lifecycle costs half): the write also frees the lease and returns the session as
 * stored; the step acts on the record Begin's lease take returned (re-read only when the version
 * CAS says it moved); in the pause and stop flows it first terminates the sandbox itself (no
 * Terminate state); and after a successful write it runs Finish in the same invocation (no
 * Finish state on the committed path). A finish that cannot complete leaves through
 * `FinishIncomplete` with the commit carried, and the Finish state (retried) completes it.
 */
import { NotFoundError, StaleWriteError } from "../../domain/errors";
import type { SessionRecord } from "../../domain/session";
import type { FlowDocument } from "../flow-document";
import type { FlowDeps } from "../flow-deps";
import { commitKind, pausedChanges, pauseReasonFor } from "../plan";
import { flowStep, leaseOf } from "../step";
import { CarryError, STEP_ERRORS } from "../step-errors";
import { finishFlow } from "./finish";
import { readForTerminate, terminateFoundSandbox } from "./terminate";

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`flow document has no ${what}`);
  return value;
}

/** The fields a new runtime (a provisioned sandbox with its agent session) sets on the session. */
function runtimeChanges(p: NonNullable<FlowDocument["provision"]>) {
  return {
    sandboxId: p.sandboxId,
    openCodeUrl: p.tunnelUrl,
    previewUrl: p.previewUrl ?? null,
    sandboxExpiresAt: p.expiresAt === null ? null : new Date(p.expiresAt).toISOString(),
    codingAgentSessionId: p.codingAgentSessionId,
    // The new runtime's key: from now on every caller derives this epoch's (sandbox-keyring.ts).
    ...(p.sandboxKeyEpoch === undefined ? {} : { sandboxKeyEpoch: p.sandboxKeyEpoch }),
    // Which snapshot layer the new runtime started from (seed 003 §6.5; kept when a sandbox was recovered).
    ...(p.layer ? { snapshotLayer: p.layer } : {}),
    // A fresh (or restored) runtime's agent state is unknown until the relay sees it (seed 002 §3h).
    agentBusy: false,
    lastKnownAgentIdleAt: null,
    idleSnapshotFailures: 0,
  };
}

/**
 * A new snapshot's facts (issue 22 §3): its expiry and the durable snapshot taken with it. They
 * replace the old ones whole, so Finish finds the old snapshots unreferenced and deletes them.
 */
function snapshotFacts(s: NonNullable<FlowDocument["snapshot"]>) {
  const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());
  return { snapshotExpiresAt: iso(s.expiresAt), durableSnapshotId: s.durableSnapshotId ?? null, durableSnapshotExpiresAt: iso(s.durableExpiresAt) };
}

/** A stopped session never runs again: it keeps no snapshot (Finish deletes them all, issue 22 §4). */
const NO_SNAPSHOTS = { snapshotId: null, snapshotExpiresAt: null, durableSnapshotId: null, durableSnapshotExpiresAt: null };

async function write(doc: FlowDocument, deps: FlowDeps, session: SessionRecord): Promise<SessionRecord> {
  // The commit frees the flow's lease and, if Begin seized it, the relay lease (issue 15: no release writes after it).
  const guard = { ...leaseOf(doc), release: true, ...(doc.begin?.relayLease ? { releaseRelay: true } : {}) };
  const now = deps.now();
  const branch = doc.begin?.branch ?? null;
  const foundSandbox = doc.begin?.sandboxId ?? null;
  switch (commitKind(doc.flow, branch)) {
    case "running": {
      return deps.sessions.transition(session, "running", now, runtimeChanges(required(doc.provision, "provision result")), guard);
    }
    case "paused": {
      const s = required(doc.snapshot, "snapshot result");
      if (s.method === "lost" && s.snapshotId === null) {
        // Issue 25 §5, §7: the sandbox is gone and there is no snapshot to pause on: nothing
        // could ever be resumed, so the session ends (`stopped`, `sandbox_lost`), saying so.
        return deps.sessions.transition(
          session,
          "stopped",
          now,
          {
            stopReason: "sandbox_lost",
            sandboxId: null,
            openCodeUrl: null,
            sandboxExpiresAt: null,
            agentBusy: false,
            lastKnownAgentIdleAt: null,
            errorMessage: "The sandbox was lost and there was no snapshot to resume from",
          },
          guard,
        );
      }
      return deps.sessions.transition(
        session,
        "paused",
        now,
        {
          ...pausedChanges({
            snapshotId: s.snapshotId,
            sandboxId: foundSandbox,
            method: s.method,
            terminated: doc.terminate?.terminated ?? false,
            pauseReason: pauseReasonFor(doc.flow, doc.reason, s.method),
            now,
          }),
          // A lost sandbox keeps the snapshots the session had (and their expiries).
          ...(s.method === "lost" ? {} : snapshotFacts(s)),
        },
        guard,
      );
    }
    case "stopped": {
      const terminated = doc.terminate?.terminated ?? false;
      const keep = foundSandbox !== null && !terminated;
      return deps.sessions.transition(
        session,
        "stopped",
        now,
        {
          stopReason: doc.reason ?? "user",
          ...NO_SNAPSHOTS,
          // A sandbox that could not be terminated stays referenced so the sweeper retries it.
          sandboxId: keep ? foundSandbox : null,
          ...(keep ? {} : { openCodeUrl: null, sandboxExpiresAt: null }),
        },
        guard,
      );
    }
    case "snapshot": {
      const snapshotId = required(doc.snapshot?.snapshotId ?? undefined, "snapshot id");
      return deps.sessions.update(session, { snapshotId, ...snapshotFacts(required(doc.snapshot, "snapshot result")) }, now, guard);
    }
    case "swap": {
      const snapshotId = required(doc.snapshot?.snapshotId ?? undefined, "snapshot id");
      return deps.sessions.update(
        session,
        { snapshotId, ...snapshotFacts(required(doc.snapshot, "snapshot result")), ...runtimeChanges(required(doc.provision, "provision result")) },
        now,
        guard,
      );
    }
  }
}

/** The pause and stop flows have no Terminate state: their commit terminates first (a Terminate state that ran leaves its result). */
function terminatesHere(doc: FlowDocument): boolean {
  if (doc.terminate) return false;
  const kind = commitKind(doc.flow, doc.begin?.branch ?? null);
  return kind === "paused" || kind === "stopped";
}

async function commitOn(doc: FlowDocument, deps: FlowDeps, session: SessionRecord): Promise<SessionRecord> {
  // The CAS on the sandbox the flow found (seed 002 §5b `WHERE sandbox_id = freshSandboxId`).
  if (session.sandboxId !== (doc.begin?.sandboxId ?? null)) {
    throw new StaleWriteError(`session ${session.id} now references sandbox ${session.sandboxId ?? "none"}, not ${doc.begin?.sandboxId ?? "none"}`);
  }
  return write(doc, deps, session);
}

/**
 * The commit and its in-process finish, for the Commit step and for ensure-runtime's Provision
 * step, which commits `running` in its own invocation (issue 15: one billed state less per
 * start or resume). Returns the commit result with `finish`; throws `FinishIncomplete` (a
 * `CarryError`) when the write landed but the finish did not complete.
 */
export async function commitFlow(given: FlowDocument, deps: FlowDeps): Promise<Record<string, unknown>> {
  let doc = given;
  let known = doc.begin?.session;
  if (terminatesHere(doc)) {
    const terminateStarted = Date.now();
    // Read (session and lease, one request) only when there is a sandbox to terminate.
    const read = async () => {
      const found = await readForTerminate(doc, deps);
      known = found.session;
      return found;
    };
    const terminate = { ...(await terminateFoundSandbox(doc, deps, known ?? (await read()).session, read)), ms: Date.now() - terminateStarted };
    doc = { ...doc, terminate };
  }
  const writeStarted = Date.now();
  let next: SessionRecord;
  try {
    if (!known) throw new StaleWriteError(`no session record in the flow document of ${doc.execution}`);
    next = await commitOn(doc, deps, known);
  } catch (err) {
    // The record Begin saw is stale only if something bumped the version under the lease (e.g. a
    // document from before records were carried): read it once and try again, as before issue 15.
    if (!(err instanceof StaleWriteError)) throw err;
    const fresh = await deps.sessions.getSession(doc.sessionId);
    if (!fresh) throw new NotFoundError(`session ${doc.sessionId} not found`);
    next = await commitOn(doc, deps, fresh);
  }
  const commit = {
    status: next.status,
    sandboxId: next.sandboxId,
    version: next.version,
    leaseReleased: true,
    ...(doc.begin?.relayLease ? { relayLeaseReleased: true } : {}),
    ms: Date.now() - writeStarted,
  };
  try {
    const finish = await finishFlow({ ...doc, commit }, deps, next);
    return { ...commit, ...(doc.terminate && !given.terminate ? { terminate: doc.terminate } : {}), finish };
  } catch (err) {
    deps.logger.error("commit written, finish incomplete: the Finish state completes it", { sessionId: doc.sessionId, execution: doc.execution, error: String(err) });
    throw new CarryError(STEP_ERRORS.finishIncomplete, "commit", commit, doc.terminate && !given.terminate ? { terminate: doc.terminate } : {});
  }
}

export const makeCommitStep = flowStep("commit", commitFlow);

