/** Lambda entry for POST /v1/sandbox/git-credential (./sandbox-credentials.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeSandboxGitCredentialHandler } from "./sandbox-credentials";

export const handler = lambdaEntry(makeSandboxGitCredentialHandler);
