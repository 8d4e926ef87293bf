/** Lambda entry for the snapshot builder's BuildSetup step (../builder-steps.ts). */
import { stepEntry } from "../../flows/lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeBuildSetupStep } from "../builder-steps";

export const handler = stepEntry(makeBuildSetupStep, awsProviders);
