/** Lambda entry for the ListPrebuildBuilds route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeListPrebuildBuildsHandler } from "./prebuilds";

export const handler = lambdaEntry(makeListPrebuildBuildsHandler);
