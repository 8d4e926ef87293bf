/** Lambda entry for the snapshot builder's BuildTerminate step (../builder-steps.ts). */
import { stepEntry } from "../../flows/lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeBuildTerminateStep } from "../builder-steps";

export const handler = stepEntry(makeBuildTerminateStep, awsProviders);
