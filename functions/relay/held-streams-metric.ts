/**
 * Publishes the relay's `HeldStreams` gauge (namespace `SandboxControlPlane`, dimension
 * `service=sandbox-relay`) every minute with `PutMetricData`, including 0: the Fargate service
 * scales on its per-task average (infra/relay-service.ts). A failed publish is logged, never
 * fatal: scaling falls back to CPU.
 */
import { CloudWatchClient, PutMetricDataCommand } from "@aws-sdk/client-cloudwatch";
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";

export const HELD_STREAMS_METRIC = { namespace: "SandboxControlPlane", name: "HeldStreams", dimension: { Name: "service", Value: "sandbox-relay" } } as const;

export function publishHeldStreams(
  held: () => number,
  logger: Logger,
  options: { client?: Pick<CloudWatchClient, "send">; intervalMs?: number } = {},
): { publishNow(): Promise<void>; stop(): void } {
  const client = options.client ?? new CloudWatchClient({});
  const publishNow = async () => {
    try {
      await client.send(
        new PutMetricDataCommand({
          Namespace: HELD_STREAMS_METRIC.namespace,
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
