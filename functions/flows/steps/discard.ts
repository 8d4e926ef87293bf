/**
 * Flow step `discard`: whatever sandbox this flow created that nothing references is terminated.
 * - After Commit: the commit of a superseded flow affected 0 items, so the sandbox Provision
 *   created is referenced by nothing.
 * - After a failed Provision (its Catch path, before RecordFailure): the step may have died after
 *   the provider created the sandbox (Lambda timeout, crash), so its result never reached the
 *   flow. Under this flow's lease nobody else provisions for the session, so every sandbox of the
 *   session the session does not reference is that one (or an earlier attempt's): it goes now,
 *   not at the sweeper's next pass. A lost lease terminates nothing (a newer flow may be
 *   provisioning).
 * A sandbox the session references now (a recovered one, or one a newer flow adopted) is never touched.
 */
import { LeaseLostError } from "../../domain/errors";
import { errorForLog } from "../../observability/logger";
import type { FlowDocument } from "../flow-document";
import type { FlowDeps } from "../flow-deps";
import { flowStep, leaseOf } from "../step";

export const makeDiscardStep = flowStep("discard", async (doc, deps) => {
  if (!doc.provision && doc.failure) return discardFailedProvision(doc, deps);
  return discardCreated(doc, deps);
});

/** The sandbox this flow's Provision created, terminated unless the session references it (also run in process by ensure-runtime's Provision when its commit did not land). */
export async function discardCreated(doc: FlowDocument, deps: FlowDeps): Promise<{ terminated: string | null }> {
  const created = doc.provision && !doc.provision.recovered ? doc.provision.sandboxId : null;
  if (!created) return { terminated: null };
  const session = await deps.sessions.getSession(doc.sessionId);
  if (session?.sandboxId === created) return { terminated: null };
  const provider = await deps.provider(session?.provider ?? "local");
  try {
    await provider.terminate(doc.sessionId, created);
    return { terminated: created };
  } catch (err) {
    deps.logger.error("could not discard a superseded flow's sandbox", { sessionId: doc.sessionId, sandboxId: created, error: errorForLog(err) });
    return { terminated: null };
  }
}

async function discardFailedProvision(doc: FlowDocument, deps: FlowDeps): Promise<{ terminated: string | null }> {
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) return { terminated: null };
  try {
    await deps.sessions.verifyLease(leaseOf(doc), deps.now());
  } catch (err) {
    if (err instanceof LeaseLostError) return { terminated: null };
    throw err;
  }
  const provider = await deps.provider(session.provider);
  const strays = (await provider.listSandboxes()).filter((s) => s.sessionId === session.id && s.sandboxId !== session.sandboxId && s.state === "running");
  const terminated: string[] = [];
  for (const stray of strays) {
    try {
      await provider.terminate(session.id, stray.sandboxId);
      terminated.push(stray.sandboxId);
    } catch (err) {
      deps.logger.error("could not terminate the sandbox of a failed provision", { sessionId: session.id, sandboxId: stray.sandboxId, error: errorForLog(err) });
    }
  }
  if (terminated.length > 0) deps.logger.warn("terminated the sandbox of a failed provision", { sessionId: session.id, sandboxIds: terminated });
  return { terminated: terminated[0] ?? null };
}

