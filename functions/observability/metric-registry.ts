/**
 * The one registry of metric definitions (issue 19): every metric the code can emit, with its
 * unit, its dimension sets (besides the `service` dimension every datum carries) and its emitter.
 * Every emitting call site names its metric from here (METRIC_NAMES in ports/metrics-sink.ts,
 * REQUEST_METRICS in ./metrics.ts, the relay's HeldStreams gauge); the recording sink refuses a
 * datum whose dimensions are not one of the declared sets, and test/infra/ops-dashboards.test.ts
 * fails when a dashboard widget or alarm names a metric this registry does not hold, or a metric
 * here appears on no dashboard and in no alarm.
 *
 * Namespace: the stack's (`SandboxControlPlane`, or `SandboxControlPlane/<stack>` for a second
 * stack: infra/control-plane-stack.ts `metricsNamespaceOf`).
 */

/** Powertools' `service` dimension on the functions' and the relay's EMF data (POWERTOOLS_SERVICE_NAME). */
export const FUNCTIONS_SERVICE = "sandbox-control-plane";
/** The `service` dimension of the relay's PutMetricData gauge (relay/held-streams-metric.ts). */
export const RELAY_GAUGE_SERVICE = "sandbox-relay";

export type MetricUnitName = "Count" | "Milliseconds" | "Seconds";

export interface MetricDefinition {
  name: string;
  unit: MetricUnitName;
  /** Dimension sets besides `service` (one datum carries exactly one of them). */
  dimensionSets: readonly (readonly string[])[];
  /** The `service` dimension's value. */
  service: typeof FUNCTIONS_SERVICE | typeof RELAY_GAUGE_SERVICE;
  /** How it is published: Powertools EMF on stdout, or the relay's PutMetricData. */
  via: "emf" | "put-metric-data";
  /** Who emits it (for the reader; the registry test checks the call sites). */
  emitter: string;
  description: string;
}

function metric<const N extends string>(name: N, unit: MetricUnitName, dimensionSets: readonly (readonly string[])[], emitter: string, description: string, extra: Partial<Pick<MetricDefinition, "service" | "via">> = {}) {
  return { name, unit, dimensionSets, emitter, description, service: extra.service ?? FUNCTIONS_SERVICE, via: extra.via ?? "emf" } as const satisfies MetricDefinition;
}

/** Provider operations measured by the provider wrapper (composition/measured-provider.ts). */
export const PROVIDER_OPERATIONS = ["ensureSandbox", "createSandbox", "snapshot", "pause", "memorySnapshot", "deleteSnapshot", "terminate", "checkSandboxes", "listSandboxes", "resolveTunnels"] as const;
/** How a sandbox started (TimeToRunning's StartKind). */
export const START_KINDS = ["fresh", "filesystem", "memory", "recovered"] as const;
export type StartKind = (typeof START_KINDS)[number];

export const METRICS = {
  // Requests (one metric per kind of request; route and status are dimensions).
  httpRequests: metric("HttpRequests", "Count", [["Route", "Status"]], "functions/http/http-handler.ts", "Every HTTP API request by route id and status"),
  httpLatency: metric("HttpRequestLatency", "Milliseconds", [["Route", "Status"]], "functions/http/http-handler.ts", "Handler time of an HTTP API request by route id and status"),
  wsRequests: metric("WebSocketRequests", "Count", [["Route", "Status"]], "functions/ws/lambda-entry.ts", "Every WebSocket route invocation ($connect, $default, $disconnect) by status"),
  stepInvocations: metric("StepInvocations", "Count", [["Function", "Outcome"]], "functions/composition/lambda.ts", "Flow steps, schedule target, sweeper, send-init by function and outcome (ok, error)"),
  // Lifecycle.
  timeToRunning: metric("TimeToRunning", "Milliseconds", [["Provider", "StartKind"]], "functions/flows/steps/finish.ts", "ensure-runtime: flow start to the running commit, by provider and start kind"),
  providerCallDuration: metric("ProviderCallDuration", "Milliseconds", [["Provider", "Operation"]], "functions/composition/measured-provider.ts", "One sandbox provider call, by provider and operation"),
  providerCallErrors: metric("ProviderCallErrors", "Count", [["Provider", "Operation"]], "functions/composition/measured-provider.ts", "A sandbox provider call that threw, by provider and operation"),
  promptQueueWait: metric("PromptQueueWait", "Milliseconds", [[]], "functions/store/dynamo-session-items.ts", "A queued prompt's wait: accepted to sent to the agent"),
  idleLag: metric("IdleSnapshotLag", "Milliseconds", [[]], "functions/flows/steps/finish.ts", "Grace expiry -> the idle snapshot decided to go"),
  idleSnapshotDuration: metric("IdleSnapshotDuration", "Milliseconds", [["method"]], "functions/flows/steps/finish.ts", "The snapshot step of an idle snapshot, by method"),
  idleSnapshots: metric("IdleSnapshots", "Count", [["mode"]], "functions/flows/steps/finish.ts", "Idle snapshots committed, by mode"),
  idleSnapshotFailures: metric("IdleSnapshotFailures", "Count", [["mode"]], "functions/flows/steps/finish.ts", "Idle snapshots failed, by mode"),
  circuitBreakerTrips: metric("IdleSnapshotCircuitBreakerTrips", "Count", [[]], "functions/flows/steps/finish.ts", "The circuit breaker stopped a session after repeated idle snapshot failures"),
  idleSecondsAvoided: metric("IdleSandboxSecondsAvoided", "Seconds", [["Provider"]], "functions/flows/steps/finish.ts", "Sandbox seconds an idle snapshot saved (pause to the sandbox's expiry), by provider"),
  orphansFound: metric("OrphanSessionsFound", "Count", [[]], "functions/sweeper/orphan-sweeper.ts", "Running sessions the sweeper found without a live relay, past their grace"),
  orphanSandboxesTerminated: metric("OrphanSandboxesTerminated", "Count", [[]], "functions/sweeper/orphan-sweeper.ts", "Sandboxes no session references, terminated by the sweeper"),
  // Money.
  activeSeconds: metric("ActiveSeconds", "Seconds", [["orgId"]], "functions/store/dynamo-org-usage.ts", "Sandbox seconds recorded, by org"),
  sandboxSeconds: metric("SandboxSeconds", "Seconds", [["Provider"]], "functions/store/dynamo-org-usage.ts", "Running sandbox seconds recorded, by provider (the same seconds as ActiveSeconds)"),
  runningSessions: metric("RunningSessions", "Count", [["Provider"]], "functions/usage/metering-pass.ts", "Running sessions by provider, counted by each metering pass (a gauge, every minute)"),
  sessionsByStatus: metric("SessionsByStatus", "Count", [["Status"]], "functions/usage/metering-pass.ts", "Sessions in each non-terminal status (starting, running, paused, error), counted by each metering pass (a gauge, every minute)"),
  creditPauses: metric("CreditPauses", "Count", [[]], "functions/usage/metering-pass.ts", "Running sessions paused because their org's credits were spent"),
  // Automations (issue 18).
  automationRuns: metric("AutomationRuns", "Count", [["Status"]], "functions/automations/automation-runs.ts", "Automation runs that ended or were skipped, by status"),
  automationFiringLag: metric("AutomationFiringLagMs", "Milliseconds", [[]], "functions/automations/automation-runs.ts", "An automation firing's scheduled time -> handled"),
  // Relay.
  relayTakeovers: metric("RelayTakeovers", "Count", [[]], "functions/relay/relay.ts", "Sessions a relay claimed from another relay (whose heartbeat expired or who retired)"),
  relayStreamsLost: metric("RelayStreamsLost", "Count", [["Reason"]], "functions/relay/relay.ts", "A held OpenCode stream lost (a reconnect is scheduled), by reason"),
  heldStreams: metric("HeldStreams", "Count", [[]], "functions/relay/held-streams-metric.ts", "OpenCode streams one relay task holds (per-task gauge, every minute; the relay scales on it)", {
    service: RELAY_GAUGE_SERVICE,
    via: "put-metric-data",
  }),
} as const;

/**
 * Default per-second prices (USD) of one sandbox as sessions size it (2 CPU, 4 GiB): Modal
 * $0.0000131/core/s + $0.00000222/GiB/s, E2B $0.000014/vCPU/s + $0.0000045/GiB/s (their public
 * price pages). The stack takes others from `-c providerPricesPerSecond=`; the local provider costs nothing.
 */
export const DEFAULT_PROVIDER_PRICES_PER_SECOND: Readonly<Record<string, number>> = { modal: 2 * 0.0000131 + 4 * 0.00000222, e2b: 2 * 0.000014 + 4 * 0.0000045, local: 0 };

export type MetricKey = keyof typeof METRICS;
export type RegisteredMetric = (typeof METRICS)[MetricKey];
export type RegisteredMetricName = RegisteredMetric["name"];

export const METRIC_DEFINITIONS: readonly MetricDefinition[] = Object.values(METRICS);

export function metricDefinition(name: string): MetricDefinition | undefined {
  return METRIC_DEFINITIONS.find((m) => m.name === name);
}

/** Whether `dimensions` (without `service`) is one of the metric's declared sets. */
export function dimensionsDeclared(def: MetricDefinition, dimensions: Record<string, string>): boolean {
  const keys = Object.keys(dimensions).filter((k) => k !== "service").sort();
  return def.dimensionSets.some((set) => set.length === keys.length && [...set].sort().every((k, i) => k === keys[i]));
}
