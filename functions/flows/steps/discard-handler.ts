/**
 * Lambda entry of the Discard step. The step lives in ./discard.ts, whose `discardCreated` ensure-runtime's Provision also runs in process (issue 15),
 * so the entry (`handler`) is a module of its own: nothing imports an entry module
 * (test/unit/module-boundaries.test.ts).
 */
import { stepEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeDiscardStep } from "./discard";

export const handler = stepEntry(makeDiscardStep, awsProviders);
