/**
 * Lambda entry of the Finish step. The step lives in ./finish.ts, which Commit also runs in
 * process after its write (issue 15), so the entry (`handler`) is a module of its own: nothing
 * imports an entry module (test/unit/module-boundaries.test.ts).
 */
import { stepEntry } from "../lambda-entry";
import { makeFinishStep } from "./finish";

export const handler = stepEntry(makeFinishStep);
