/** Lambda entry for the PatchPrebuild route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makePatchPrebuildHandler } from "./prebuilds";

export const handler = lambdaEntry(makePatchPrebuildHandler);
