/** Lambda entry for the ListRepos route (./repos.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeListReposHandler } from "./repos";

export const handler = lambdaEntry(makeListReposHandler);
