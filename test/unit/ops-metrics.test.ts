/**
 * Issue 19's figures at their source: the one registry is enforced where data is recorded, provider
 * calls are timed and their errors counted by provider and operation (one wrapper over any
 * provider), the start kind of a sandbox, and the local summary's percentiles and dollars.
 */
import { describe, expect, it } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import { measuredProviders } from "../../functions/composition/measured-provider";
import { startKindOf } from "../../functions/flows/steps/finish";
import { METRIC_DEFINITIONS, dimensionsDeclared } from "../../functions/observability/metric-registry";
import { distribution, opsSummary } from "../../functions/observability/ops-summary";
import { METRIC_NAMES, RecordingMetricsSink } from "../../functions/ports/metrics-sink";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { InstantSandboxProvider } from "../support/instant-provider";

describe("the metric registry", () => {
  it("names each metric once, and the recording sink refuses a datum the registry does not declare", () => {
    const names = METRIC_DEFINITIONS.map((d) => d.name);
    expect(new Set(names).size).toBe(names.length);
    const sink = new RecordingMetricsSink();
    sink.put(METRIC_NAMES.timeToRunning, 10, "Milliseconds", { Provider: "modal", StartKind: "fresh" });
    expect(() => sink.put(METRIC_NAMES.timeToRunning, 10, "Milliseconds", { Provider: "modal" })).toThrow(/TimeToRunning .*not as observability\/metric-registry.ts declares it/);
    expect(() => sink.put(METRIC_NAMES.idleLag, 10, "Seconds")).toThrow(/IdleSnapshotLag/);
    expect(sink.values(METRIC_NAMES.timeToRunning)).toEqual([10]);
  });

  it("dimension sets compare without order and ignore Powertools' service dimension", () => {
    const def = METRIC_DEFINITIONS.find((d) => d.name === "ProviderCallDuration");
    if (!def) throw new Error("no ProviderCallDuration");
    expect(dimensionsDeclared(def, { Operation: "snapshot", Provider: "e2b", service: "x" })).toBe(true);
    expect(dimensionsDeclared(def, { Operation: "snapshot" })).toBe(false);
  });
});

describe("provider call figures", () => {
  it("times every provider operation by provider and operation, and counts the ones that throw", async () => {
    const metrics = new RecordingMetricsSink();
    const inner = new FaultInjectingProvider(new InstantSandboxProvider({ type: "e2b" }));
    inner.failNext("snapshot", new ProviderError("e2b", "snapshot", "snapshot refused"));
    const provider = await measuredProviders(async () => inner, metrics)("e2b");
    expect(await measuredProviders(async () => inner, metrics)("e2b")).not.toBe(inner);
    const { sandboxId } = await provider.createSandbox({ sessionId: "ses_1", repos: [], envVars: {} });
    await expect(provider.snapshot("ses_1", sandboxId)).rejects.toThrow("snapshot refused");
    await provider.snapshot("ses_1", sandboxId);
    // Properties and unmeasured methods pass through untouched.
    expect(provider.type).toBe("e2b");
    expect(provider.supportsPause).toBe(inner.supportsPause);
    expect(metrics.recorded.map((m) => [m.name, m.dimensions])).toEqual([
      ["ProviderCallDuration", { Provider: "e2b", Operation: "createSandbox" }],
      ["ProviderCallErrors", { Provider: "e2b", Operation: "snapshot" }],
      ["ProviderCallDuration", { Provider: "e2b", Operation: "snapshot" }],
      ["ProviderCallDuration", { Provider: "e2b", Operation: "snapshot" }],
    ]);
    expect(metrics.values(METRIC_NAMES.providerCallDuration).every((ms) => ms >= 0)).toBe(true);
  });

  it("returns one wrapper per provider instance", async () => {
    const inner = new InstantSandboxProvider();
    const factory = measuredProviders(async () => inner, new RecordingMetricsSink());
    expect(await factory("local")).toBe(await factory("local"));
  });
});

describe("start kinds (TimeToRunning's StartKind)", () => {
  it("fresh, filesystem snapshot, memory snapshot, recovered", () => {
    expect(startKindOf({ recovered: false, layer: "base", startedFrom: "img-base" })).toBe("fresh");
    expect(startKindOf({ recovered: false, layer: "none", startedFrom: null })).toBe("fresh");
    expect(startKindOf({ recovered: false })).toBe("fresh");
    expect(startKindOf({ recovered: false, layer: "session", startedFrom: "snap_1" })).toBe("filesystem");
    expect(startKindOf({ recovered: false, layer: "prebuild", startedFrom: "snap_2" })).toBe("filesystem");
    expect(startKindOf({ recovered: false, layer: "session", startedFrom: "mem:abc" })).toBe("memory");
    expect(startKindOf({ recovered: true, layer: null, startedFrom: null })).toBe("recovered");
    // E2B: resumed from its native pause, under the paused sandbox's own id.
    expect(startKindOf({ recovered: false, layer: "session", startedFrom: "e2b-sbx-1" }, "e2b-sbx-1")).toBe("memory");
    expect(startKindOf({ recovered: false, layer: "session", startedFrom: "snap_1" }, "e2b-sbx-1")).toBe("filesystem");
  });
});

describe("the local ops summary", () => {
  it("nearest-rank percentiles", () => {
    expect(distribution([])).toEqual({ count: 0, p50: null, p95: null, p99: null, max: null });
    const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(distribution(hundred)).toEqual({ count: 100, p50: 50, p95: 95, p99: 99, max: 100 });
  });

  it("groups the figures by their dimensions and prices idle seconds avoided", () => {
    const sink = new RecordingMetricsSink();
    sink.put(METRIC_NAMES.timeToRunning, 100, "Milliseconds", { Provider: "modal", StartKind: "memory" });
    sink.put(METRIC_NAMES.timeToRunning, 300, "Milliseconds", { Provider: "modal", StartKind: "memory" });
    sink.put(METRIC_NAMES.timeToRunning, 900, "Milliseconds", { Provider: "e2b", StartKind: "fresh" });
    sink.put(METRIC_NAMES.idleSecondsAvoided, 1000, "Seconds", { Provider: "modal" });
    sink.put(METRIC_NAMES.idleSecondsAvoided, 10, "Seconds", { Provider: "e2b" });
    sink.put(METRIC_NAMES.idleSnapshots, 1, "Count", { mode: "inactivity" });
    sink.put(METRIC_NAMES.providerCallDuration, 5, "Milliseconds", { Provider: "modal", Operation: "pause" });
    sink.put(METRIC_NAMES.providerCallErrors, 1, "Count", { Provider: "modal", Operation: "pause" });
    sink.put(METRIC_NAMES.relayTakeovers, 1, "Count");
    const s = opsSummary({ recorded: sink.recorded, heldStreams: 3, since: new Date(0), now: new Date(1000), pricesPerSecond: { modal: 0.001, e2b: 0.01 } });
    expect(s.timeToRunningMs).toEqual([
      { provider: "modal", startKind: "memory", count: 2, p50: 100, p95: 300, p99: 300, max: 300 },
      { provider: "e2b", startKind: "fresh", count: 1, p50: 900, p95: 900, p99: 900, max: 900 },
    ]);
    expect(s.idle.sandboxSecondsAvoided).toEqual({ modal: 1000, e2b: 10 });
    expect(s.idle.dollarsAvoided).toBe(1.1);
    expect(s.idle.snapshots).toEqual({ inactivity: 1 });
    expect(s.providerCalls).toEqual([{ provider: "modal", operation: "pause", errors: 1, durationMs: { count: 1, p50: 5, p95: 5, p99: 5, max: 5 } }]);
    expect(s.relay).toEqual({ heldStreams: 3, takeovers: 1, streamsLost: {} });
  });
});
