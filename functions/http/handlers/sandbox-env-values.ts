/** Lambda entry for POST /v1/sandbox/env-values (./sandbox-credentials.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxEnvValuesHandler } from "./sandbox-credentials";

export const handler = lambdaEntry(makeSandboxEnvValuesHandler);
