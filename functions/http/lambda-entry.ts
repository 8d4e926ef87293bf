/**
 * Lambda entry points of the HTTP routes: the dependencies come from the container's runtime
 * (functions/composition, built once per container at cold start), never per request. The route's
 * own middy stack (http-handler.ts) wears the Powertools middlewares, locally too.
 */
import type { Context, APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { awsRuntime, noProviders, type ProviderBinding } from "../composition/lambda";
import type { HttpDeps, HttpHandler } from "./http-handler";

/** `providers`: `awsProviders` for a route that calls a sandbox provider; none otherwise (a smaller bundle). */
export function lambdaEntry(make: (deps: HttpDeps) => HttpHandler, providers: ProviderBinding = noProviders): HttpHandler {
  let handler: HttpHandler | undefined;
  return (event: APIGatewayProxyEventV2, context: Context): Promise<APIGatewayProxyStructuredResultV2> => {
    handler ??= make(awsRuntime(providers).httpDeps);
    return handler(event, context);
  };
}

/**
 * One Lambda serving a family of routes (`group` in routes.ts), dispatched on the event's
 * `routeKey` ("POST /v1/repos"): CloudFormation allows 500 resources per stack and every function
 * brings five (function, role, policy, log group, alarm). Each route's handler is built on its
 * first request, from the container's one runtime. A route key outside the map is a 404.
 */
export function lambdaRouteGroup(routes: Readonly<Record<string, (deps: HttpDeps) => HttpHandler>>, providers: ProviderBinding = noProviders): HttpHandler {
  const handlers = new Map<string, HttpHandler>();
  return (event: APIGatewayProxyEventV2, context: Context): Promise<APIGatewayProxyStructuredResultV2> => {
    const make = routes[event.routeKey];
    if (!make) {
      return Promise.resolve({ statusCode: 404, headers: { "content-type": "application/json" }, body: JSON.stringify({ error: { code: "not_found", message: `no route ${event.routeKey}` } }) });
    }
    let handler = handlers.get(event.routeKey);
    if (!handler) {
      handler = make(awsRuntime(providers).httpDeps);
      handlers.set(event.routeKey, handler);
    }
    return handler(event, context);
  };
}
