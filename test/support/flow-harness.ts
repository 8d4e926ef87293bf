/**
 * Flow test harness: dynalite, the real ASL files run by the local flow runner with the real
 * step functions (dependencies from the shared composition root, functions/composition), timers for schedules, a recording client push, and whichever provider and
 * agent client the test passes (the real local provider + OpenCode, or the instant provider,
 * wrapped in the fault-injecting provider).
 */
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import { parseConfig, type Config } from "../../functions/config/config";
import { newSessionId } from "../../functions/domain/ids";
import { newSessionRecord, type SessionRecord } from "../../functions/domain/session";
import type { FlowDeps } from "../../functions/flows/flow-deps";
import type { HttpDeps } from "../../functions/http/http-handler";
import type { WsDeps } from "../../functions/ws/ws-deps";
import { createLogger } from "../../functions/observability/logger";
import type { AgentClient } from "../../functions/ports/agent-client";
import type { FlowName, StartFlowResult } from "../../functions/ports/flow-runner";
import type { SandboxProvider } from "../../functions/ports/sandbox-provider";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import type { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { composeRuntime } from "../../functions/composition/compose";
import { createMetrics } from "../../functions/observability/metrics";
import { LocalSecretKeyWrapper } from "../../functions/secrets/local-key-wrapper";
import { RecordingMetricsSink } from "../../functions/ports/metrics-sink";
import { LocalFlowRunner } from "../../infra/local/local-flow-runner";
import { LocalLifecycleScheduler } from "../../infra/local/local-lifecycle-scheduler";
import { startTestTable, type TestTable } from "./dynalite";
import { RecordingPush } from "./recording-push";
import { SqsStandIn } from "./sqs-stand-in";
import { SqsNudgeSource, SqsRelayNudge } from "../../functions/adapters/aws/sqs-relay-nudge";

/** The flow harness's master sandbox key (tests derive the expected SIDECAR_TOKEN from it). */
export const TEST_MASTER_KEY = "test-master-key-0123456789abcdefghijklmnop";
/** The flow harness's local secrets master key (wraps each org secret's data key). */
export const TEST_SECRETS_MASTER_KEY = Buffer.alloc(32, 7);

export interface FlowHarness {
  table: TestTable;
  deps: FlowDeps;
  runner: LocalFlowRunner;
  scheduler: LocalLifecycleScheduler;
  push: RecordingPush;
  metrics: RecordingMetricsSink;
  /**
   * The relay nudge queue the flows send to, as in AWS (an SQS stand-in at the SDK surface):
   * relays in a test receive from `nudgeSource()`.
   */
  nudgeQueue: SqsStandIn;
  nudgeSource(): SqsNudgeSource;
  /** The real relay lease store (seize/release always go to it). */
  relayLeases: DynamoRelayLeaseStore;
  /**
   * `always` (default): no relay runs in flow tests, and prompt delivery and the idle predicate
   * proceed as if one watched. `store`: what the relay lease on the session item says.
   */
  setRelayWatched(mode: "always" | "store"): void;
  config: Config;
  createSession(overrides?: Partial<SessionRecord>): Promise<SessionRecord>;
  /** Starts a flow at the session's current generation (its lease fence), as the API does. */
  start(flow: FlowName, sessionId: string, actor?: string, reason?: string): Promise<StartFlowResult>;
  /** Starts a flow (or joins the one running for the same work) and waits for that execution to end. */
  run(flow: FlowName, sessionId: string, actor?: string, reason?: string): Promise<SessionRecord>;
  session(sessionId: string): Promise<SessionRecord>;
  addClient(sessionId: string, connectionId?: string): Promise<string>;
  /** Moves the flows' clock forward (lease expiry without waiting). */
  advance(ms: number): void;
  /** The composition's HTTP and WebSocket handler deps over the same stores (route handlers in flow tests). */
  httpDeps: HttpDeps;
  wsDeps: WsDeps;
  close(): Promise<void>;
}

export async function startFlowHarness(options: { provider: SandboxProvider; agent: AgentClient; env?: Record<string, string> }): Promise<FlowHarness> {
  const table = await startTestTable();
  const config = parseConfig({ TABLE_NAME: table.tableName, LEASE_TTL_SECONDS: "60", ...options.env });
  const logger = createLogger("flow-test");
  const push = new RecordingPush();
  const metrics = new RecordingMetricsSink();
  const relayWatch: { mode: "always" | "store" } = { mode: "always" };
  const nudgeQueue = new SqsStandIn();
  const built: { deps?: FlowDeps } = {};
  let offsetMs = 0;
  const runner = new LocalFlowRunner({ deps: () => must(built.deps), logger, retryIntervalScale: 0.01 });
  const scheduler = new LocalLifecycleScheduler((event) => makeScheduleFiredHandler(must(built.deps))(event).then(() => undefined), {
    onError: (err) => logger.error("schedule failed", { error: String(err) }),
  });
  // The same composition as the Lambdas and the local runtime, over the test table's client.
  const rt = composeRuntime(config, {
    doc: table.doc,
    logger,
    metrics: createMetrics(),
    flowMetrics: metrics,
    push,
    scheduler,
    flows: runner,
    provider: () => Promise.resolve(options.provider),
    agent: options.agent,
    sandboxKeys: (epochs) => staticKeyring(TEST_MASTER_KEY, epochs),
    // Real envelope encryption under a fixed local master key: tests seed secrets with deps.secrets.put.
    secretKeys: new LocalSecretKeyWrapper(TEST_SECRETS_MASTER_KEY),
    afterConnect: () => Promise.resolve(),
    relayNudge: new SqsRelayNudge(() => nudgeQueue.client, nudgeQueue.queueUrl),
    now: () => new Date(Date.now() + offsetMs),
    // No relay runs in flow tests unless a test starts one: delivery may proceed as if watched.
    flowRelayLeases: (store) => ({
      watched: (sessionId, now) => (relayWatch.mode === "always" ? Promise.resolve(true) : store.watched(sessionId, now)),
      seize: (sessionId, owner, now, ttl) => store.seize(sessionId, owner, now, ttl),
      release: (lease) => store.release(lease),
    }),
  });
  const { sessions, relayLeases: relayStore } = rt.stores;
  const deps = rt.flowDeps;
  built.deps = deps;
  const ready = deps;
  const start = async (flow: FlowName, sessionId: string, actor = "test", reason?: string) => {
    const lease = await sessions.readLease(sessionId);
    return runner.start({ flow, sessionId, generation: lease?.fence ?? 0, actor, ...(reason ? { reason } : {}) });
  };
  const session = async (id: string) => {
    const s = await sessions.getSession(id);
    if (!s) throw new Error(`session ${id} not found`);
    return s;
  };
  return {
    table,
    deps: ready,
    runner,
    scheduler,
    push,
    metrics,
    relayLeases: relayStore,
    nudgeQueue,
    // WaitTimeSeconds 0: a test's pollNudges returns at once with what is queued.
    nudgeSource: () => new SqsNudgeSource(() => nudgeQueue.client, nudgeQueue.queueUrl, 0),
    setRelayWatched: (mode) => {
      relayWatch.mode = mode;
    },
    config,
    createSession: async (overrides = {}) => {
      const record = { ...newSessionRecord({ id: newSessionId(), orgId: "org-a", userId: "user-a", provider: options.provider.type, now: new Date() }), ...overrides };
      // As the create route does with a generated id (one batch write), unless the test chose the id.
      await sessions.createSession(record, { freshId: overrides.id === undefined });
      return record;
    },
    start,
    run: async (flow, sessionId, actor, reason) => {
      const { executionName } = await start(flow, sessionId, actor, reason);
      await runner.executions.get(executionName)?.done;
      return session(sessionId);
    },
    session,
    addClient: async (sessionId, connectionId = `conn-${Math.random().toString(36).slice(2, 10)}`) => {
      await ready.connections.add({ connectionId, sessionId, userId: "user-a", clientType: "web", connectedAt: new Date().toISOString(), ready: true });
      return connectionId;
    },
    advance: (ms) => {
      offsetMs += ms;
    },
    httpDeps: rt.httpDeps,
    wsDeps: rt.wsDeps,
    close: async () => {
      await runner.whenIdle();
      await scheduler.close();
      await table.close();
    },
  };
}

function must<T>(value: T | undefined): T {
  if (value === undefined) throw new Error("flow harness used before it was built");
  return value;
}
