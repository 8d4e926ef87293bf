/**
 * POST /v1/sessions/{id}/snapshot: a checkpoint without stopping (seed 000 §7) through the
 * `snapshot` flow; the session stays running on the same sandbox. 202; 409 unless running.
 */
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireStatus, startSessionFlow } from "../session-actions";
import { loadOwnedSession, requirePrincipal } from "../session-access";
import { SessionPathParams } from "./get-session";

export const makeSnapshotSessionHandler = httpRoute({ name: "SnapshotSession", auth: true, params: SessionPathParams }, async ({ params, principal }, deps) => {
  const caller = requirePrincipal(principal);
  const session = await loadOwnedSession(deps.sessions, caller, params.id);
  requireStatus(session, ["running"], "snapshot");
  await startSessionFlow(deps, session, "snapshot", `user:${caller.userId}`, "user");
  return { status: 202, body: { session: toSessionView(session) } };
});

export const handler = lambdaEntry(makeSnapshotSessionHandler);
