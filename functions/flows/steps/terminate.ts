/**
 * Flow step `terminate` (seed 000 §4, §8; seed 002 §5b step 7): terminate the sandbox the flow
 * found when it took the lease. Destructive, so the lease is verified first (seed 002
 * verification 17): a flow whose lease was taken over fails with `LeaseLost` and terminates
 * nothing. A provider failure does not fail the flow: the commit keeps the sandbox id so the
 * sweeper retries (seed 002 §5b "if terminate fails, keep sandboxId").
 */
import { NotFoundError } from "../../domain/errors";
import { errorForLog } from "../../observability/logger";
import { snapshotMethod, terminatesSandbox } from "../plan";
import { flowStep, leaseOf } from "../step";
import { stepEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";

export const makeTerminateStep = flowStep("terminate", async (doc, deps) => {
  const lease = leaseOf(doc);
  const sandboxId = doc.begin?.sandboxId ?? null;
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) throw new NotFoundError(`session ${doc.sessionId} not found`);
  const provider = await deps.provider(session.provider);
  const branch = doc.begin?.branch ?? null;
  const method = doc.snapshot?.method ?? (doc.flow === "stop" ? null : snapshotMethod(doc.flow, branch, provider));
  if (!sandboxId || !terminatesSandbox(doc.flow, branch, method)) return { sandboxId, terminated: false };
  await deps.sessions.verifyLease(lease, deps.now());
  try {
    await provider.terminate(session.id, sandboxId);
    return { sandboxId, terminated: true };
  } catch (err) {
    deps.logger.error("terminate failed: sandbox kept on the session for the sweeper", { sessionId: session.id, sandboxId, error: errorForLog(err) });
    return { sandboxId, terminated: false };
  }
});

export const handler = stepEntry(makeTerminateStep, awsProviders);
