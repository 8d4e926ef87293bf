/**
 * The key operational figures from in-process metrics (issue 19: `GET /v1/ops/summary` on the
 * local runtime): the same figures the dashboards show, computed from the data points the
 * recording metrics sink kept since the runtime started. Percentiles are nearest-rank.
 */
import type { RecordedMetric } from "../ports/metrics-sink";
import { DEFAULT_PROVIDER_PRICES_PER_SECOND, METRICS } from "./metric-registry";

export interface Distribution {
  count: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
}

export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? null;
}

const round = (v: number | null) => (v === null ? null : Math.round(v * 1000) / 1000);

export function distribution(values: readonly number[]): Distribution {
  const sorted = [...values].sort((a, b) => a - b);
  return { count: sorted.length, p50: round(percentile(sorted, 50)), p95: round(percentile(sorted, 95)), p99: round(percentile(sorted, 99)), max: round(sorted.at(-1) ?? null) };
}

function groupBy(points: readonly RecordedMetric[], dims: readonly string[]): Map<string, { dimensions: Record<string, string>; values: number[] }> {
  const out = new Map<string, { dimensions: Record<string, string>; values: number[] }>();
  for (const p of points) {
    const dimensions = Object.fromEntries(dims.map((d) => [d, p.dimensions[d] ?? ""]));
    const key = JSON.stringify(dimensions);
    const group = out.get(key) ?? { dimensions, values: [] };
    group.values.push(p.value);
    out.set(key, group);
  }
  return out;
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

export interface OpsSources {
  recorded: readonly RecordedMetric[];
  /** Streams the in-process relay holds now. */
  heldStreams: number;
  since: Date;
  now: Date;
  pricesPerSecond?: Readonly<Record<string, number>>;
}

export function opsSummary(src: OpsSources) {
  const of = (name: string) => src.recorded.filter((m) => m.name === name);
  /** A gauge's last value by one dimension. */
  const latest = (name: string, dim: string) => Object.fromEntries([...groupBy(of(name), [dim]).values()].map((g) => [g.dimensions[dim] ?? "", g.values.at(-1) ?? 0]));
  const counted = (name: string, dim: string) => Object.fromEntries([...groupBy(of(name), [dim]).values()].map((g) => [g.dimensions[dim] ?? "", sum(g.values)]));
  const prices = src.pricesPerSecond ?? DEFAULT_PROVIDER_PRICES_PER_SECOND;
  const avoided = counted(METRICS.idleSecondsAvoided.name, "Provider");
  const errors = groupBy(of(METRICS.providerCallErrors.name), ["Provider", "Operation"]);
  return {
    since: src.since.toISOString(),
    at: src.now.toISOString(),
    timeToRunningMs: [...groupBy(of(METRICS.timeToRunning.name), ["Provider", "StartKind"]).values()].map((g) => ({ provider: g.dimensions.Provider, startKind: g.dimensions.StartKind, ...distribution(g.values) })),
    providerCalls: [...groupBy(of(METRICS.providerCallDuration.name), ["Provider", "Operation"]).entries()].map(([key, g]) => ({
      provider: g.dimensions.Provider,
      operation: g.dimensions.Operation,
      errors: errors.get(key)?.values.length ?? 0,
      durationMs: distribution(g.values),
    })),
    promptQueueWaitMs: distribution(of(METRICS.promptQueueWait.name).map((m) => m.value)),
    idle: {
      lagMs: distribution(of(METRICS.idleLag.name).map((m) => m.value)),
      snapshots: counted(METRICS.idleSnapshots.name, "mode"),
      failures: counted(METRICS.idleSnapshotFailures.name, "mode"),
      snapshotDurationMs: Object.fromEntries([...groupBy(of(METRICS.idleSnapshotDuration.name), ["method"]).values()].map((g) => [g.dimensions.method ?? "", distribution(g.values)])),
      circuitBreakerTrips: of(METRICS.circuitBreakerTrips.name).length,
      sandboxSecondsAvoided: avoided,
      dollarsAvoided: round(Object.entries(avoided).reduce((total, [provider, seconds]) => total + seconds * (prices[provider] ?? 0), 0)),
    },
    sweeper: { orphanSessionsFound: of(METRICS.orphansFound.name).length, orphanSandboxesTerminated: of(METRICS.orphanSandboxesTerminated.name).length },
    runningSessions: latest(METRICS.runningSessions.name, "Provider"),
    /** The last metering pass's count of each non-terminal status. */
    sessionsByStatus: latest(METRICS.sessionsByStatus.name, "Status"),
    usage: { activeSeconds: round(sum(of(METRICS.activeSeconds.name).map((m) => m.value))), sandboxSecondsByProvider: counted(METRICS.sandboxSeconds.name, "Provider"), creditPauses: of(METRICS.creditPauses.name).length },
    relay: { heldStreams: src.heldStreams, takeovers: of(METRICS.relayTakeovers.name).length, streamsLost: counted(METRICS.relayStreamsLost.name, "Reason") },
  };
}
export type OpsSummary = ReturnType<typeof opsSummary>;
