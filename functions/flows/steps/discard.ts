/**
 * Flow step `discard`: the commit of a superseded flow affected 0 items, so whatever sandbox
 * this flow created is referenced by nothing; terminate it. A sandbox the session references
 * now (a recovered one, or one a newer flow adopted) is never touched.
 */
import { errorForLog } from "../../observability/logger";
import { flowStep } from "../step";
import { stepEntry } from "../lambda-entry";

export const makeDiscardStep = flowStep("discard", async (doc, deps) => {
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
});

export const handler = stepEntry(makeDiscardStep);
