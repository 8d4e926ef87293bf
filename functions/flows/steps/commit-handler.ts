/**
 * Lambda entry of the Commit step. The step lives in ./commit.ts, which ensure-runtime's Provision also runs in process (issue 15: `commitFlow`),
 * so the entry (`handler`) is a module of its own: nothing imports an entry module
 * (test/unit/module-boundaries.test.ts).
 */
import { stepEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeCommitStep } from "./commit";

export const handler = stepEntry(makeCommitStep, awsProviders);
