/** Lambda entry for the ListPrebuilds route (./prebuilds.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeListPrebuildsHandler } from "./prebuilds";

export const handler = lambdaEntry(makeListPrebuildsHandler);
