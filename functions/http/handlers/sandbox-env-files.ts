/** Lambda entry for PUT /v1/sandbox/env-files (./sandbox-agent-tools.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxEnvFilesHandler } from "./sandbox-agent-tools";

export const handler = lambdaEntry(makeSandboxEnvFilesHandler);
