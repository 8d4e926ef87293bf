/**
 * Publishes the relay's `HeldStreams` gauge (in the stack's metrics namespace, the relay's
 * POWERTOOLS_METRICS_NAMESPACE: `SandboxControlPlane`, or `SandboxControlPlane/<stack>` for a
 * second stack, which is all its role may publish to; dimension `service=sandbox-relay`) every minute with `PutMetricData`, including 0: the Fargate service
 * scales on its per-task average (infra/relay-service.ts). A failed publish is logged, never
 * fatal: scaling falls back to CPU.
 */
import { CloudWatchClient, PutMetricDataCommand } from "@aws-sdk/client-cloudwatch";
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";
import { METRICS } from "../observability/metric-registry";

export const HELD_STREAMS_METRIC = { namespace: "SandboxControlPlane", name: METRICS.heldStreams.name, dimension: { Name: "service", Value: METRICS.heldStreams.service } } as const;

export function publishHeldStreams(
  held: () => number,
  logger: Logger,
  options: { client?: Pick<CloudWatchClient, "send">; intervalMs?: number; namespace?: string } = {},
): { publishNow(): Promise<void>; stop(): void } {
  const client = options.client ?? new CloudWatchClient({});
  const publishNow = async () => {
    try {
      await client.send(
        new PutMetricDataCommand({
          Namespace: options.namespace ?? HELD_STREAMS_METRIC.namespace,
          MetricData: [{ MetricName: HELD_STREAMS_METRIC.name, Dimensions: [HELD_STREAMS_METRIC.dimension], Value: held(), Unit: "Count" }],
        }),
      );
    } catch (err) {
      logger.warn("HeldStreams publish failed", { error: errorForLog(err) });
    }
  };
  const timer = setInterval(() => void publishNow(), options.intervalMs ?? 60_000);
  timer.unref();
  void publishNow();
  return { publishNow, stop: () => clearInterval(timer) };
}
