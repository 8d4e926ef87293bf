/** Metrics as CloudWatch EMF (Powertools Metrics): printed to stdout, extracted by CloudWatch. */
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";

export { MetricUnit };

export function createMetrics(): Metrics {
  return new Metrics({
    namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? "SandboxControlPlane",
    serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? "sandbox-control-plane",
  });
}

export const metrics = createMetrics();
