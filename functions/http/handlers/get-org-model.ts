/** Lambda entry for GET /v1/org/model (./org-model.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeGetOrgModelHandler } from "./org-model";

export const handler = lambdaEntry(makeGetOrgModelHandler);
