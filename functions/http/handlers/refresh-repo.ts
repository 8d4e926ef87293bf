/** Lambda entry for the RefreshRepo route (./repos.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeRefreshRepoHandler } from "./repos";

export const handler = lambdaEntry(makeRefreshRepoHandler);
