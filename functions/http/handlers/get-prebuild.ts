/** Lambda entry for the GetPrebuild route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeGetPrebuildHandler } from "./prebuilds";

export const handler = lambdaEntry(makeGetPrebuildHandler);
