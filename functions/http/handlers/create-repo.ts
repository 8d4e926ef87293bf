/** Lambda entry for the CreateRepo route (./repos.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeCreateRepoHandler } from "./repos";

export const handler = lambdaEntry(makeCreateRepoHandler);
