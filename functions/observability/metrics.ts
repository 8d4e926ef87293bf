/** Metrics as CloudWatch EMF (Powertools Metrics): printed to stdout, extracted by CloudWatch. */
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { METRICS } from "./metric-registry";

export { MetricUnit };

/**
 * Request metrics: one metric name per kind of request, what varies is a dimension (never one
 * metric name per route and status).
 */
export const REQUEST_METRICS = {
  /** Every HTTP API request; dimensions `Route` (e.g. `CreateSession`) and `Status` (e.g. `202`). */
  http: METRICS.httpRequests.name,
  /** Handler time of every HTTP API request (ms), same dimensions. */
  httpLatency: METRICS.httpLatency.name,
  /** Every WebSocket route invocation; dimensions `Route` (`$connect`, `$default`...) and `Status`. */
  ws: METRICS.wsRequests.name,
  /** Every flow step, schedule target and sweeper invocation; dimensions `Function` and `Outcome` (`ok`, `error`). */
  step: METRICS.stepInvocations.name,
} as const;

export function createMetrics(options: { namespace?: string; serviceName?: string } = {}): Metrics {
  return new Metrics({
    namespace: options.namespace ?? "SandboxControlPlane",
    serviceName: options.serviceName ?? "sandbox-control-plane",
  });
}
