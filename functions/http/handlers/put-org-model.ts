/** Lambda entry for PUT /v1/org/model (./org-model.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makePutOrgModelHandler } from "./org-model";

export const handler = lambdaEntry(makePutOrgModelHandler);
