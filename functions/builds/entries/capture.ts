/** Lambda entry for the snapshot builder's BuildCapture step (../builder-steps.ts). */
import { stepEntry } from "../../flows/lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeBuildCaptureStep } from "../builder-steps";

export const handler = stepEntry(makeBuildCaptureStep, awsProviders);
