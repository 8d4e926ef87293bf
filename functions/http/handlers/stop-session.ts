/**
 * DELETE /v1/sessions/{id}: terminate the sandbox and end the session (`stopped`, terminal;
 * seed 000 §8) through the `stop` flow. 202; 409 when it is already stopped.
 */
import { lambdaEntry } from "../lambda-entry";
import { lifecycleActionRoute } from "../session-actions";

export const makeStopSessionHandler = lifecycleActionRoute({ name: "StopSession", flow: "stop", allowed: ["starting", "running", "paused", "error"], action: "stop", reason: "user" });

export const handler = lambdaEntry(makeStopSessionHandler);
