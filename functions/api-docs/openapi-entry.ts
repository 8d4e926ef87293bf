/** Lambda entry of `GET /v1/openapi.json` (infra/api-docs-stack.ts). */
import { lambdaEntry } from "../http/lambda-entry";
import { makeOpenApiHandler } from "./openapi-handler";
import { servedRoutes } from "./served-routes";

export const handler = lambdaEntry(makeOpenApiHandler(servedRoutes));
