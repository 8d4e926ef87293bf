/**
 * POST /v1/sessions/{id}/resume: provisions or restores the sandbox through `ensure-runtime`
 * (the same flow as first connect). 202 at once; a running session is already there (202, no
 * flow); a stopped one is 409. Activity is touched before the flow starts (seed 002 constraint
 * 3), so an idle snapshot that is deciding right now sees the fresh activity and stands down.
 */
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireStatus, startSessionFlow } from "../session-actions";
import { loadOwnedSession, requirePrincipal } from "../session-access";
import { SessionPathParams } from "./get-session";

export const makeResumeSessionHandler = httpRoute({ name: "ResumeSession", auth: true, params: SessionPathParams }, async ({ params, principal }, deps) => {
  const caller = requirePrincipal(principal);
  const session = await loadOwnedSession(deps.sessions, caller, params.id);
  requireStatus(session, ["starting", "running", "paused", "error"], "resume");
  await deps.sessions.touchActivity(session.id, deps.now());
  if (session.status !== "running") await startSessionFlow(deps, session, "ensure-runtime", `user:${caller.userId}`, "resume");
  return { status: 202, body: { session: toSessionView(session) } };
});

export const handler = lambdaEntry(makeResumeSessionHandler);
