/** Lambda entry for the DeletePrebuild route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeDeletePrebuildHandler } from "./prebuilds";

export const handler = lambdaEntry(makeDeletePrebuildHandler, awsProviders);
