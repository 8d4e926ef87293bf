/**
 * POST /v1/sessions/{id}/resume: provisions or restores the sandbox through `ensure-runtime`
 * (the same flow as first connect). 202 at once; a running session is already there (202, no
 * flow); a stopped one is 409. Activity is touched before the flow starts (seed 002 constraint
 * 3), so an idle snapshot that is deciding right now sees the fresh activity and stands down.
 */
import { lambdaEntry } from "../lambda-entry";
import { lifecycleActionRoute } from "../session-actions";

export const makeResumeSessionHandler = lifecycleActionRoute({ name: "ResumeSession", flow: "ensure-runtime", allowed: ["starting", "running", "paused", "error"], action: "resume", reason: "resume", alreadyDone: ["running"], touchActivity: true });

export const handler = lambdaEntry(makeResumeSessionHandler);
