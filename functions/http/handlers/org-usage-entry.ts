/** Lambda entry of the Org route group (routes.ts `group: "Org"`; handlers in ./org-usage.ts and ./org-model.ts). */
import { lambdaRouteGroup } from "../lambda-entry";
import { makeGetOrgModelHandler, makePutOrgModelHandler } from "./org-model";
import { makeGetOrgHandler, makeGetUsageHandler, makePutOrgLimitsHandler } from "./org-usage";

/** Route key -> handler; test/unit/http-route-groups.test.ts keeps it equal to the route table. */
export const ROUTES = {
  "GET /v1/org": makeGetOrgHandler,
  "PUT /v1/org/limits": makePutOrgLimitsHandler,
  "GET /v1/usage": makeGetUsageHandler,
  "GET /v1/org/model": makeGetOrgModelHandler,
  "PUT /v1/org/model": makePutOrgModelHandler,
};

export const handler = lambdaRouteGroup(ROUTES);
