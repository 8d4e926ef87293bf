/** Lambda entry for the CreatePrebuild route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeCreatePrebuildHandler } from "./prebuilds";

export const handler = lambdaEntry(makeCreatePrebuildHandler);
