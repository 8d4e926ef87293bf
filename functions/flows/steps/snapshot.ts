/**
 * Flow step `snapshot` (seed 000 §4, §6, §7; seed 002 §5b step 6): snapshot the sandbox the
 * flow found, with the method `snapshotMethod` picks (native pause, memory, filesystem). The
 * lease is verified first: a flow that lost its lease must not pause a sandbox another flow now
 * owns. A failure leaves the session as it was (the ASL routes it to `record-failure`).
 */
import { NotFoundError } from "../../domain/errors";
import { snapshotMethod } from "../plan";
import { flowStep, leaseOf } from "../step";
import { stepEntry } from "../lambda-entry";

export const makeSnapshotStep = flowStep("snapshot", async (doc, deps) => {
  const lease = leaseOf(doc);
  const sandboxId = doc.begin?.sandboxId;
  if (!sandboxId) throw new NotFoundError(`session ${doc.sessionId} has no sandbox to snapshot`);
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) throw new NotFoundError(`session ${doc.sessionId} not found`);
  const provider = await deps.provider(session.provider);
  const method = snapshotMethod(doc.flow, doc.begin?.branch ?? null, provider);
  await deps.sessions.verifyLease(lease, deps.now());
  const { snapshotId } =
    method === "pause"
      ? await provider.pause(session.id, sandboxId)
      : method === "memory"
        ? await provider.memorySnapshot(session.id, sandboxId)
        : await provider.snapshot(session.id, sandboxId);
  return { snapshotId, method };
});

export const handler = stepEntry(makeSnapshotStep);
