/** Lambda entry of the Repos route group (routes.ts `group: "Repos"`; handlers in ./repos.ts). */
import { lambdaRouteGroup } from "../lambda-entry";
import { makeCreateRepoHandler, makeGetRepoHandler, makeListReposHandler, makePatchRepoHandler, makeRefreshRepoHandler } from "./repos";

/** Route key -> handler; test/unit/http-route-groups.test.ts keeps it equal to the route table. */
export const ROUTES = {
  "POST /v1/repos": makeCreateRepoHandler,
  "GET /v1/repos": makeListReposHandler,
  "GET /v1/repos/{id}": makeGetRepoHandler,
  "PATCH /v1/repos/{id}": makePatchRepoHandler,
  "POST /v1/repos/{id}/refresh": makeRefreshRepoHandler,
};

export const handler = lambdaRouteGroup(ROUTES);
