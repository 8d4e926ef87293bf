/** `GET /v1/openapi.json` in the local runtime: the same handler as the Lambda (functions/api-docs). */
import type { HttpDeps, HttpHandler } from "../../functions/http/http-handler";
import { API_DOC_ROUTES } from "../../functions/api-docs/routes";
import { makeOpenApiHandler } from "../../functions/api-docs/openapi-handler";
import { servedRoutes } from "../../functions/api-docs/served-routes";
import type { LocalExtraRoute } from "./local-http-server";

export function localApiDocRoutes(deps: HttpDeps): LocalExtraRoute[] {
  return API_DOC_ROUTES.map((route) => ({ route, handler: makeOpenApiHandler(servedRoutes)(deps) as HttpHandler }));
}
