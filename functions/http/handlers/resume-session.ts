/**
 * POST /v1/sessions/{id}/resume: provisions or restores the sandbox through `ensure-runtime`
 * (the same flow as first connect). 202 at once; a stopped session is 409. Activity is touched
 * before the flow starts (seed 002 constraint 3), so an idle snapshot that is deciding right now
 * sees the fresh activity and stands down.
 *
 * A running session may be on its way out (a pause, idle snapshot or migration holds it): the
 * request is recorded first and the session read again (issue 25 §1). Still running: nothing to
 * start, and a flow that commits `paused` later resumes it for this request (flows/wake-waiters.ts);
 * paused by now: this starts `ensure-runtime` itself.
 */
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireStatus, startSessionFlow } from "../session-actions";
import { loadOwnedSessionWithFence, requirePrincipal, SessionPathParams } from "../session-access";
import { admitToRun } from "../../usage/usage-gate";

export const makeResumeSessionHandler = httpRoute({ name: "ResumeSession", auth: true, params: SessionPathParams }, async ({ params, principal }, deps) => {
  const caller = requirePrincipal(principal);
  const { session, fence } = await loadOwnedSessionWithFence(deps.sessions, caller, params.id);
  requireStatus(session, ["starting", "running", "paused", "error"], "resume");
  await deps.sessions.touchActivity(session.id, deps.now());
  let current = { session, fence };
  if (session.status === "running") {
    await deps.sessions.requestResume(session.id, deps.now());
    const again = await deps.sessions.getSessionWithLease(session.id);
    if (again) current = { session: again.session, fence: again.lease.fence };
  }
  if (current.session.status !== "running" && current.session.status !== "stopped") {
    // API.md "Usage, limits and credits": 402 credits_exhausted, 429 quota_exceeded (a running place is taken here).
    await admitToRun(deps.usage, current.session, deps.now());
    await startSessionFlow(deps, current.session, "ensure-runtime", `user:${caller.userId}`, "resume", current.fence);
  }
  return { status: 202, body: { session: toSessionView(current.session, deps.now()) } };
});

export const handler = lambdaEntry(makeResumeSessionHandler);
