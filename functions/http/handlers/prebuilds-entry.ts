/** Lambda entry of the Prebuilds route group (routes.ts `group: "Prebuilds"`; handlers in ./prebuilds.ts). */
import { lambdaRouteGroup } from "../lambda-entry";
import {
  makeCreatePrebuildBuildHandler,
  makeCreatePrebuildHandler,
  makeGetPrebuildHandler,
  makeListPrebuildBuildsHandler,
  makeListPrebuildsHandler,
  makePatchPrebuildHandler,
} from "./prebuilds";

/** Route key -> handler; test/unit/http-route-groups.test.ts keeps it equal to the route table. */
export const ROUTES = {
  "POST /v1/prebuilds": makeCreatePrebuildHandler,
  "GET /v1/prebuilds": makeListPrebuildsHandler,
  "GET /v1/prebuilds/{id}": makeGetPrebuildHandler,
  "PATCH /v1/prebuilds/{id}": makePatchPrebuildHandler,
  "POST /v1/prebuilds/{id}/builds": makeCreatePrebuildBuildHandler,
  "GET /v1/prebuilds/{id}/builds": makeListPrebuildBuildsHandler,
};

export const handler = lambdaRouteGroup(ROUTES);
