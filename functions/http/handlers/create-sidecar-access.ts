/** Lambda entry for POST /v1/sessions/{id}/sidecar-access (./sidecar-access.ts). */
import { lambdaEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { makeSidecarAccessHandler } from "./sidecar-access";

export const handler = lambdaEntry(makeSidecarAccessHandler, awsProviders);
