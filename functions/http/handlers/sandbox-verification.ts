/** Lambda entry for POST /v1/sandbox/verifications (./sandbox-agent-tools.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxVerificationHandler } from "./sandbox-agent-tools";

export const handler = lambdaEntry(makeSandboxVerificationHandler);
