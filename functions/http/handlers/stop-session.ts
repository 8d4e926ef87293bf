/**
 * DELETE /v1/sessions/{id}: terminate the sandbox and end the session (`stopped`, terminal;
 * seed 000 §8) through the `stop` flow. 202; 409 when it is already stopped.
 */
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireStatus, startSessionFlow } from "../session-actions";
import { loadOwnedSession, requirePrincipal } from "../session-access";
import { SessionPathParams } from "./get-session";

export const makeStopSessionHandler = httpRoute({ name: "StopSession", auth: true, params: SessionPathParams }, async ({ params, principal }, deps) => {
  const caller = requirePrincipal(principal);
  const session = await loadOwnedSession(deps.sessions, caller, params.id);
  requireStatus(session, ["starting", "running", "paused", "error"], "stop");
  await startSessionFlow(deps, session, "stop", `user:${caller.userId}`, "user");
  return { status: 202, body: { session: toSessionView(session) } };
});

export const handler = lambdaEntry(makeStopSessionHandler);
