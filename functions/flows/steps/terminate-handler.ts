/**
 * Lambda entry of the Terminate step. The step lives in ./terminate.ts, which Commit also runs in
 * process in the pause and stop flows (issue 15), so the entry (`handler`) is a module of its own:
 * nothing imports an entry module (test/unit/module-boundaries.test.ts).
 */
import { awsProviders } from "../../providers/aws-providers";
import { stepEntry } from "../lambda-entry";
import { makeTerminateStep } from "./terminate";

export const handler = stepEntry(makeTerminateStep, awsProviders);
