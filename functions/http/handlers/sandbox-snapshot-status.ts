/** Lambda entry for GET /v1/sandbox/snapshots/{execution} (./sandbox-agent-tools.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxSnapshotStatusHandler } from "./sandbox-agent-tools";

export const handler = lambdaEntry(makeSandboxSnapshotStatusHandler);
