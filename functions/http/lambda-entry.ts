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
