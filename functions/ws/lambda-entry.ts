/**
 * Lambda entry for the WebSocket handlers: the dependencies come from the container's runtime
 * (functions/composition: one DynamoDB client, the push adapter on the WebSocket API's
 * management endpoint, the asynchronous send-init invocation), built once per container, and
 * every handler wears the Powertools middlewares.
 */
import type { Context } from "aws-lambda";
import { awsRuntime, stepMetric, withPowertools } from "../composition/lambda";
import { REQUEST_METRICS } from "../observability/metrics";
import type { WsDeps, WsEvent, WsResult } from "./ws-deps";

export function wsEntry(make: (deps: WsDeps) => (event: WsEvent) => Promise<WsResult>): (event: WsEvent, context: Context) => Promise<WsResult> {
  let handler: ((event: WsEvent, context: Context) => Promise<WsResult>) | undefined;
  return (event, context) => {
    if (!handler) {
      const rt = awsRuntime();
      const route = make(rt.wsDeps);
      handler = withPowertools(rt, (e: WsEvent) => route(e), {
        name: REQUEST_METRICS.ws,
        dimensions: (e, result) => ({ Route: e.requestContext.routeKey, Status: String(result.statusCode) }),
        onError: (e) => ({ Route: e.requestContext.routeKey, Status: "500" }),
      });
    }
    return handler(event, context);
  };
}

/** A lazily built handler for non-route functions (send-init). */
export function lazyEntry<E, R>(make: (deps: WsDeps) => (event: E) => Promise<R>): (event: E, context: Context) => Promise<R> {
  let handler: ((event: E, context: Context) => Promise<R>) | undefined;
  return (event, context) => {
    if (!handler) {
      const rt = awsRuntime();
      const run = make(rt.wsDeps);
      handler = withPowertools(rt, (e: E) => run(e), stepMetric<E, R>());
    }
    return handler(event, context);
  };
}
