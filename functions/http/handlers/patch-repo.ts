/** Lambda entry for the PatchRepo route (./repos.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makePatchRepoHandler } from "./repos";

export const handler = lambdaEntry(makePatchRepoHandler);
