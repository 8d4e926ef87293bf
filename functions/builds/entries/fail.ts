/** Lambda entry for the snapshot builder's BuildFail step (../builder-steps.ts). */
import { stepEntry } from "../../flows/lambda-entry";
import { makeBuildFailStep } from "../builder-steps";

export const handler = stepEntry(makeBuildFailStep);
