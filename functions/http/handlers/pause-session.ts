/**
 * POST /v1/sessions/{id}/pause: snapshot, terminate, `paused` with `pauseReason: "user"`
 * (seed 000 §4) through the `pause` flow. 202 at once; 409 unless the session is running.
 */
import { lambdaEntry } from "../lambda-entry";
import { lifecycleActionRoute } from "../session-actions";

export const makePauseSessionHandler = lifecycleActionRoute({ name: "PauseSession", flow: "pause", allowed: ["running"], action: "pause", reason: "user" });

export const handler = lambdaEntry(makePauseSessionHandler);
