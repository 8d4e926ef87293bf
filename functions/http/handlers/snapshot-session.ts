/**
 * POST /v1/sessions/{id}/snapshot: a checkpoint without stopping (seed 000 §7) through the
 * `snapshot` flow; the session stays running on the same sandbox. 202; 409 unless running.
 */
import { lambdaEntry } from "../lambda-entry";
import { lifecycleActionRoute } from "../session-actions";

export const makeSnapshotSessionHandler = lifecycleActionRoute({ name: "SnapshotSession", flow: "snapshot", allowed: ["running"], action: "snapshot", reason: "user" });

export const handler = lambdaEntry(makeSnapshotSessionHandler);
