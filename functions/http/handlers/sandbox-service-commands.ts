/** Lambda entry for PUT /v1/sandbox/service-commands (./sandbox-agent-tools.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxServiceCommandsHandler } from "./sandbox-agent-tools";

export const handler = lambdaEntry(makeSandboxServiceCommandsHandler);
