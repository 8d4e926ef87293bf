/**
 * POST /v1/sessions/{id}/pause: snapshot, terminate, `paused` with `pauseReason: "user"`
 * (seed 000 §4) through the `pause` flow. 202 at once; 409 unless the session is running.
 */
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireStatus, startSessionFlow } from "../session-actions";
import { loadOwnedSession, requirePrincipal } from "../session-access";
import { SessionPathParams } from "./get-session";

export const makePauseSessionHandler = httpRoute({ name: "PauseSession", auth: true, params: SessionPathParams }, async ({ params, principal }, deps) => {
  const caller = requirePrincipal(principal);
  const session = await loadOwnedSession(deps.sessions, caller, params.id);
  requireStatus(session, ["running"], "pause");
  await startSessionFlow(deps, session, "pause", `user:${caller.userId}`, "user");
  return { status: 202, body: { session: toSessionView(session) } };
});

export const handler = lambdaEntry(makePauseSessionHandler);
