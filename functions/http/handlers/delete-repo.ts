/** Lambda entry for the DeleteRepo route (./repos.ts). */
import { lambdaEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeDeleteRepoHandler } from "./repos";

export const handler = lambdaEntry(makeDeleteRepoHandler, awsProviders);
