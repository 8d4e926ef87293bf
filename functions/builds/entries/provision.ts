/** Lambda entry for the snapshot builder's BuildProvision step (../builder-steps.ts). */
import { stepEntry } from "../../flows/lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeBuildProvisionStep } from "../builder-steps";

export const handler = stepEntry(makeBuildProvisionStep, awsProviders);
