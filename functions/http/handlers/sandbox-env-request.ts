/** Lambda entry for POST /v1/sandbox/env-requests (./sandbox-agent-tools.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxEnvRequestHandler } from "./sandbox-agent-tools";

export const handler = lambdaEntry(makeSandboxEnvRequestHandler);
