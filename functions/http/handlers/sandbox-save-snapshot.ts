/** Lambda entry for POST /v1/sandbox/snapshots (./sandbox-agent-tools.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxSaveSnapshotHandler } from "./sandbox-agent-tools";

export const handler = lambdaEntry(makeSandboxSaveSnapshotHandler);
