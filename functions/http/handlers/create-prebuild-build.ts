/** Lambda entry for the CreatePrebuildBuild route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeCreatePrebuildBuildHandler } from "./prebuilds";

export const handler = lambdaEntry(makeCreatePrebuildBuildHandler);
