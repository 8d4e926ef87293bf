/**
 * Flow step `terminate` (seed 000 §4, §8; seed 002 §5b step 7): terminate the sandbox the flow
 * found when it took the lease. Destructive, so the lease is verified first (seed 002
 * verification 17): a flow whose lease was taken over fails with `LeaseLost` and terminates
 * nothing. A provider failure does not fail the flow: the commit keeps the sandbox id so the
 * sweeper retries (seed 002 §5b "if terminate fails, keep sandboxId").
 */
import { NotFoundError } from "../../domain/errors";
import type { SessionRecord } from "../../domain/session";
import { errorForLog } from "../../observability/logger";
import type { FlowDeps } from "../flow-deps";
import type { FlowDocument } from "../flow-document";
import { snapshotMethod, terminatesSandbox } from "../plan";
import { assertLeaseHeld, flowStep, leaseOf, leaseSurelyHeld } from "../step";

/**
 * The terminate itself, also run in process by Commit in the pause and stop flows (issue 15: no
 * Terminate state there). `read`: the session with its stored lease, from one strongly consistent
 * read, so the lease check costs no second read.
 */
export async function terminateFoundSandbox(
  doc: FlowDocument,
  deps: FlowDeps,
  /** The session (the record Begin's lease take returned will do: only its provider is used before the read). */
  session: SessionRecord,
  /** The strongly consistent read of the session and its lease, made only when there is a sandbox to terminate. */
  read: () => Promise<{ session: SessionRecord; lease: { owner: string | null; fence: number; expiresAt: number | null } }>,
): Promise<{ sandboxId: string | null; terminated: boolean }> {
  const lease = leaseOf(doc);
  const sandboxId = doc.begin?.sandboxId ?? null;
  const provider = await deps.provider(session.provider);
  const branch = doc.begin?.branch ?? null;
  const method = doc.snapshot?.method ?? (doc.flow === "stop" ? null : snapshotMethod(doc.flow, branch, provider));
  if (!sandboxId || !terminatesSandbox(doc.flow, branch, method)) return { sandboxId, terminated: false };
  if (!leaseSurelyHeld(lease, deps.now(), deps.config.LEASE_TTL_SECONDS)) assertLeaseHeld(lease, (await read()).lease, deps.now());
  try {
    await provider.terminate(doc.sessionId, sandboxId);
    return { sandboxId, terminated: true };
  } catch (err) {
    deps.logger.error("terminate failed: sandbox kept on the session for the sweeper", { sessionId: session.id, sandboxId, error: errorForLog(err) });
    return { sandboxId, terminated: false };
  }
}

/** Reads the session and its lease in one request; `SessionNotFound` when it is gone. */
export async function readForTerminate(doc: FlowDocument, deps: FlowDeps): Promise<{ session: SessionRecord; lease: { owner: string | null; fence: number; expiresAt: number | null } }> {
  const read = await deps.sessions.getSessionWithLease(doc.sessionId);
  if (!read) throw new NotFoundError(`session ${doc.sessionId} not found`);
  return read;
}

export const makeTerminateStep = flowStep("terminate", async (doc, deps) => {
  const read = await readForTerminate(doc, deps);
  return terminateFoundSandbox(doc, deps, read.session, () => Promise.resolve(read));
});

