/**
 * Metrics port: operational figures the flows, the idle checks and the sweeper publish (seed 002
 * "metrics": idle lag, snapshot duration and failures, idle sandbox-seconds avoided, circuit
 * breaker trips, orphans). AWS adapter: CloudWatch EMF (observability/emf-metrics-sink.ts), which
 * the stack's alarms read; local and tests: an in-memory recorder (bench figures come from it).
 */
export const METRIC_NAMES = {
  /** Grace expiry -> the idle snapshot decided to go (ms). */
  idleLag: "IdleSnapshotLag",
  /** The snapshot step of an idle snapshot (ms). */
  idleSnapshotDuration: "IdleSnapshotDuration",
  /** Idle snapshots committed (dimension `mode`). */
  idleSnapshots: "IdleSnapshots",
  idleSnapshotFailures: "IdleSnapshotFailures",
  /** The circuit breaker stopped a session after repeated idle snapshot failures (alarmed). */
  circuitBreakerTrips: "IdleSnapshotCircuitBreakerTrips",
  /** Sandbox seconds an idle snapshot saved: from the pause to the sandbox's expiry. */
  idleSecondsAvoided: "IdleSandboxSecondsAvoided",
  /** Running sessions the sweeper found without a live relay, past their grace (alarmed). */
  orphansFound: "OrphanSessionsFound",
  /** Sandboxes no session references, terminated by the sweeper. */
  orphanSandboxesTerminated: "OrphanSandboxesTerminated",
  /** Sandbox seconds the metering pass recorded (dimension `orgId`; API.md "Usage, limits and credits"). */
  activeSeconds: "ActiveSeconds",
  /** Running sessions paused because their org's `monthlyActiveSeconds` was spent (`credit_limit`). */
  creditPauses: "CreditPauses",
  /** Automation runs that ended or were skipped (dimension `Status`; functions/automations/automation-runs.ts). */
  automationRuns: "AutomationRuns",
  /** An automation firing's scheduled time -> handled (ms). */
  automationFiringLag: "AutomationFiringLagMs",
} as const;
export type MetricName = (typeof METRIC_NAMES)[keyof typeof METRIC_NAMES];

export type MetricUnitName = "Count" | "Milliseconds" | "Seconds";

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
    this.recorded.push({ name, value, unit, dimensions });
  }

  values(name: MetricName): number[] {
    return this.recorded.filter((m) => m.name === name).map((m) => m.value);
  }
}
