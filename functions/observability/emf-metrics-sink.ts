/** The metrics port over CloudWatch EMF: one single-metric document per datum, flushed at once. */
import type { Metrics } from "@aws-lambda-powertools/metrics";
import type { MetricName, MetricUnitName, MetricsSink } from "../ports/metrics-sink";

export class EmfMetricsSink implements MetricsSink {
  constructor(private readonly metrics: Metrics) {}

  put(name: MetricName, value: number, unit: MetricUnitName, dimensions: Record<string, string> = {}): void {
    const single = this.metrics.singleMetric();
    for (const [key, dim] of Object.entries(dimensions)) single.addDimension(key, dim);
    single.addMetric(name, unit, value);
  }
}
