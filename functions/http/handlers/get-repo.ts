/** Lambda entry for the GetRepo route (./repos.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeGetRepoHandler } from "./repos";

export const handler = lambdaEntry(makeGetRepoHandler);
