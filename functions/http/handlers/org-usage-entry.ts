/** Lambda entry of the Org route group (routes.ts `group: "Org"`; handlers in ./org-usage.ts). */
import { lambdaRouteGroup } from "../lambda-entry";
import { makeGetOrgHandler, makeGetUsageHandler, makePutOrgLimitsHandler } from "./org-usage";

/** Route key -> handler; test/unit/http-route-groups.test.ts keeps it equal to the route table. */
export const ROUTES = {
  "GET /v1/org": makeGetOrgHandler,
  "PUT /v1/org/limits": makePutOrgLimitsHandler,
  "GET /v1/usage": makeGetUsageHandler,
};

export const handler = lambdaRouteGroup(ROUTES);
