/**
 * Metrics port: operational figures the flows, the idle checks and the sweeper publish (seed 002
 * "metrics": idle lag, snapshot duration and failures, idle sandbox-seconds avoided, circuit
 * breaker trips, orphans). AWS adapter: CloudWatch EMF (observability/emf-metrics-sink.ts), which
 * the stack's alarms read; local and tests: an in-memory recorder (bench figures come from it).
 */
import { METRICS, dimensionsDeclared, type MetricUnitName } from "../observability/metric-registry";

export type { MetricUnitName };

/** The figures published through this port, named from the one registry (observability/metric-registry.ts). */
export const METRIC_NAMES = {
  idleLag: METRICS.idleLag.name,
  idleSnapshotDuration: METRICS.idleSnapshotDuration.name,
  idleSnapshots: METRICS.idleSnapshots.name,
  idleSnapshotFailures: METRICS.idleSnapshotFailures.name,
  circuitBreakerTrips: METRICS.circuitBreakerTrips.name,
  idleSecondsAvoided: METRICS.idleSecondsAvoided.name,
  orphansFound: METRICS.orphansFound.name,
  orphanSandboxesTerminated: METRICS.orphanSandboxesTerminated.name,
  activeSeconds: METRICS.activeSeconds.name,
  sandboxSeconds: METRICS.sandboxSeconds.name,
  runningSessions: METRICS.runningSessions.name,
  sessionsByStatus: METRICS.sessionsByStatus.name,
  creditPauses: METRICS.creditPauses.name,
  timeToRunning: METRICS.timeToRunning.name,
  providerCallDuration: METRICS.providerCallDuration.name,
  providerCallErrors: METRICS.providerCallErrors.name,
  promptQueueWait: METRICS.promptQueueWait.name,
  relayTakeovers: METRICS.relayTakeovers.name,
  relayStreamsLost: METRICS.relayStreamsLost.name,
  automationRuns: METRICS.automationRuns.name,
  automationFiringLag: METRICS.automationFiringLag.name,
} as const;
export type MetricName = (typeof METRIC_NAMES)[keyof typeof METRIC_NAMES];

export interface MetricsSink {
  put(name: MetricName, value: number, unit: MetricUnitName, dimensions?: Record<string, string>): void;
}

export interface RecordedMetric {
  name: MetricName;
  value: number;
  unit: MetricUnitName;
  dimensions: Record<string, string>;
}

/** Keeps every datum in memory (local runtime, tests, bench). */
export class RecordingMetricsSink implements MetricsSink {
  readonly recorded: RecordedMetric[] = [];

  put(name: MetricName, value: number, unit: MetricUnitName, dimensions: Record<string, string> = {}): void {
    // A datum the registry does not declare (wrong unit or dimension set) is a bug: fail where it is emitted.
    const def = Object.values(METRICS).find((m) => m.name === name);
    if (!def || def.unit !== unit || !dimensionsDeclared(def, dimensions)) {
      throw new Error(`metric ${name} (${unit}, dimensions ${JSON.stringify(Object.keys(dimensions))}) is not as observability/metric-registry.ts declares it`);
    }
    this.recorded.push({ name, value, unit, dimensions });
  }

  values(name: MetricName): number[] {
    return this.recorded.filter((m) => m.name === name).map((m) => m.value);
  }
}
