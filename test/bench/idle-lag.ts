/**
 * Section 6: idle-detection lag (seed 002 issue 6). Idle lag = the time from a session's idle
 * grace running out (`lastActivityAt + grace`) to the start of its idle snapshot (the
 * `idle-snapshot` flow's Begin step, lease held). The seed polled every 30 s, so its lag is
 * anywhere up to 30 s; ours is event-driven (functions/idle/idle-check.ts): whatever may make a
 * session idle arms a one-time `idle-check` schedule for the grace expiry, and when it fires the
 * check evaluates the predicate and starts the flow. Figures only, never assertions.
 *
 * Wired as the flow harness (test/support/flow-harness.ts) is: the real ASL run by the local flow
 * runner with the real steps, the real local lifecycle scheduler (timers) calling the real
 * schedule target (functions/schedules/schedule-fired.ts), the instant provider (zero latency,
 * memory snapshots on), a scripted agent, and the in-memory metrics sink the Finish step publishes
 * `IdleSnapshotLag` to. No relay runs, and the agent counts as watched (as in the harness), so the
 * predicate's remaining conditions are clients, proxies, prompts and the grace. Two differences,
 * so the figure is our overhead rather than the bench's own queueing: dynalite runs in a child
 * process (relay-dynalite.ts), as DynamoDB is not in the Lambda's process, and ASL retries keep
 * their real intervals.
 *
 * Every step of every session shares this process's event loop (in AWS each is its own Lambda),
 * so the bench keeps what it does not measure out of the measured window:
 *   1. set-up (not measured): N sessions made running through ensure-runtime with one client
 *      connected (the $connect handler's write), as many at once as the machine takes. The idle
 *      check ensure-runtime's Finish arms fires during set-up, finds the client, and re-arms
 *      nothing (counted separately);
 *   2. measured: at even intervals over the spread, each session's client leaves through the real
 *      WebSocket $disconnect handler, which touches activity and arms the idle check for
 *      `now + grace` (the seed's "user closes the tab"). From there on no client is connected and
 *      nothing here calls the idle check: the local scheduler's timer fires it.
 * Sizes: BENCH_IDLE_SESSIONS (default 200), BENCH_IDLE_GRACE_SECONDS (default 1),
 * BENCH_IDLE_SPREAD_SECONDS (the disconnects' window, default 30). About a minute in all.
 *
 * Early deliveries (issue 15): EventBridge Scheduler fires an idle check within the minute its
 * time falls in, so in AWS it arrives up to a minute early. The bench delivers each check early
 * by a random 0..BENCH_IDLE_EARLY_MS (default 1000; 0 = on time), carrying its exact time as the
 * AWS adapter does, so the measured lag covers the path an early check takes: the check starts
 * idle-snapshot at once with `notBefore`, and the flow's Wait state holds Begin until then (no
 * Lambda sleeps; before issue 15 the target slept until the exact time).
 * Import this module only after the environment is set (it loads the runtime). Alone:
 *   POWERTOOLS_LOG_LEVEL=SILENT POWERTOOLS_METRICS_DISABLED=true AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true \
 *     npx tsx -e 'import("./test/bench/idle-lag.ts").then((m) => m.benchIdleLag())'
 */
import { DynamoOrgSettingsStore } from "../../functions/store/dynamo-org-settings";
import { DynamoRepoCatalog } from "../../functions/store/dynamo-repo-catalog";
import { DynamoOrgUsageStore } from "../../functions/store/dynamo-org-usage";
import { fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseConfig, type Config } from "../../functions/config/config";
import { DynamoOrgSecretStore } from "../../functions/store/dynamo-org-secrets";
import { LocalSecretKeyWrapper } from "../../functions/secrets/local-key-wrapper";
import { newSessionId } from "../../functions/domain/ids";
import { newSessionRecord } from "../../functions/domain/session";
import type { FlowDeps } from "../../functions/flows/flow-deps";
import { createLogger } from "../../functions/observability/logger";
import type { FlowName } from "../../functions/ports/flow-runner";
import { scheduleName, type ScheduleFiredEvent } from "../../functions/ports/lifecycle-scheduler";
import { METRIC_NAMES, RecordingMetricsSink } from "../../functions/ports/metrics-sink";
import type { LifecycleEvent } from "../../functions/ports/session-items";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import { createDocumentClient } from "../../functions/store/dynamo-client";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoConnectionRegistry, DynamoLifecycleEventLog, DynamoPromptQueue, DynamoProxyConnectionRegistry } from "../../functions/store/dynamo-session-items";
import { DynamoApiTokenStore, DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { DynamoSnapshotDeletionQueue } from "../../functions/store/dynamo-snapshot-deletions";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { makeDisconnectHandler } from "../../functions/ws/handlers/disconnect";
import type { WsDeps, WsEvent, WsResult } from "../../functions/ws/ws-deps";
import { DynamoWsTicketStore } from "../../functions/store/dynamo-ws-tickets";
import { LocalFlowRunner } from "../../infra/local/local-flow-runner";
import { LocalLifecycleScheduler } from "../../infra/local/local-lifecycle-scheduler";
import { InstantSandboxProvider } from "../support/instant-provider";
import { RecordingPush } from "../support/recording-push";
import { ScriptedAgent } from "../support/scripted-agent";
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import { heading, mean, ms, note, percentile, table } from "./report";

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  const value = raw === undefined || raw === "" ? fallback : Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number (got "${raw}")`);
  return value;
}

const N = Math.round(envNumber("BENCH_IDLE_SESSIONS", 200));
const GRACE_SECONDS = envNumber("BENCH_IDLE_GRACE_SECONDS", 1);
const SPREAD_SECONDS = envNumber("BENCH_IDLE_SPREAD_SECONDS", 30);
const EARLY_MS = envNumber("BENCH_IDLE_EARLY_MS", 1000);
/** Sessions taken through the whole path first (JIT, ASL, dynalite), not measured. */
const WARM_UP = 10;
/** Set-up sessions made running at once. */
const SETUP_CONCURRENCY = 4;
/** How long after the last grace expiry to wait for the idle snapshots before reporting what there is. */
const SETTLE_TIMEOUT_MS = 30_000;
const SEED_POLL_SECONDS = 30;
/**
 * This section at dd49683 (issue 15's baseline: the target slept in the Lambda until the exact
 * time, checks delivered on time), run from a checkout of dd49683 on this 2-CPU machine with its
 * defaults (200 sessions, grace 1 s, 30 s spread) at load average ~5.6 (other work competing).
 */
const AT_DD49683 = { n: 200, p50Ms: 18, p99Ms: 225, maxMs: 328, meanMs: 29.41 };

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const cpuMs = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
};

interface DynamoChild {
  endpoint: string;
  tableName: string;
  /** The child's CPU time so far (ms). */
  cpuMs(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts relay-dynalite.ts (dynalite with the project table) in a child process. */
async function startDynamoChild(): Promise<DynamoChild> {
  const child: ChildProcess = fork(path.join(here, "relay-dynalite.ts"), [], { cwd: repoRoot, execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const next = <T extends { cmd: string }>(cmd: string, timeoutMs: number): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const done = (err: Error | null, message?: T) => {
        clearTimeout(timer);
        child.off("message", listener);
        child.off("exit", exited);
        if (err) reject(err);
        else resolve(message as T);
      };
      const listener = (m: { cmd: string }) => {
        if (m.cmd === cmd) done(null, m as T);
      };
      const exited = (code: number | null, signal: string | null) => done(new Error(`relay-dynalite.ts exited (${signal ?? code})`));
      const timer = setTimeout(() => done(new Error(`relay-dynalite.ts: no "${cmd}" within ${timeoutMs} ms`)), timeoutMs);
      child.on("message", listener);
      child.once("exit", exited);
    });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    if (child.connected) child.disconnect();
    const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
    await gone;
    clearTimeout(timer);
  };
  try {
    const ready = await next<{ cmd: string; endpoint: string; tableName: string }>("ready", 60_000);
    return {
      endpoint: ready.endpoint,
      tableName: ready.tableName,
      cpuMs: async () => {
        const stats = next<{ cmd: string; cpuMs: number }>("stats", 10_000);
        child.send({ cmd: "stats" });
        return (await stats).cpuMs;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** What the bench sees: the flow dependencies, and probes on the schedules. */
interface Bench {
  deps: FlowDeps;
  config: Config;
  runner: LocalFlowRunner;
  scheduler: LocalLifecycleScheduler;
  metrics: RecordingMetricsSink;
  /** Idle-check firings per session, as the local scheduler delivered them. */
  firings: Map<string, Firing[]>;
  /** Idle-check arms per session (first arms and re-arms). */
  arms: Map<string, Arm[]>;
  /** Schedule targets that threw. */
  scheduleErrors: number;
  /** The real WebSocket $disconnect handler. */
  disconnect(event: WsEvent): Promise<WsResult>;
  /** Resolves when no schedule target is running. */
  drained(): Promise<void>;
  close(): Promise<void>;
}

/** One arming of an idle check: the time it was armed for. */
interface Arm {
  armedFor: number;
}

/** One delivery of an idle-check schedule: when it arrived, and the time it was armed for. */
interface Firing {
  firedAt: number;
  armedFor: number;
}

function startBench(endpoint: string, tableName: string): Bench {
  const doc = createDocumentClient({ endpoint });
  const config = parseConfig({ TABLE_NAME: tableName, LEASE_TTL_SECONDS: "60", IDLE_SNAPSHOT_DELAY_SECONDS: String(GRACE_SECONDS) });
  const logger = createLogger("bench-idle-lag");
  const relayStore = new DynamoRelayLeaseStore(doc, tableName);
  const built: { deps?: FlowDeps } = {};
  const deps = (): FlowDeps => {
    if (!built.deps) throw new Error("bench used before it was built");
    return built.deps;
  };
  const runner = new LocalFlowRunner({ deps, logger });
  const firings = new Map<string, Firing[]>();
  const arms = new Map<string, Arm[]>();
  const bench = { scheduleErrors: 0 };
  const running = new Set<Promise<unknown>>();
  /** The exact time each early-armed idle check is for (the event carries it, as in AWS). */
  const exactAt = new Map<string, string>();
  // The local runtime's wiring: the scheduler delivers each firing to the real schedule target.
  const scheduler = new LocalLifecycleScheduler(
    async (fired: ScheduleFiredEvent) => {
      const exact = fired.purpose === "idle-check" ? exactAt.get(scheduleName(fired)) : undefined;
      const event = exact ? { ...fired, at: exact } : fired;
      if (event.purpose === "idle-check") {
        const list = firings.get(event.sessionId) ?? [];
        list.push({ firedAt: Date.now(), armedFor: Date.parse(event.at) });
        firings.set(event.sessionId, list);
      }
      const run = makeScheduleFiredHandler(deps())(event);
      running.add(run);
      try {
        await run;
      } finally {
        running.delete(run);
      }
    },
    {
      onError: (err, event) => {
        bench.scheduleErrors += 1;
        logger.error("schedule target failed", { schedule: scheduleName(event), error: String(err) });
      },
    },
  );
  const metrics = new RecordingMetricsSink();
  const provider = new InstantSandboxProvider({ supportsMemorySnapshot: true });
  built.deps = {
    sessions: new DynamoSessionStore(doc, tableName),
    prompts: new DynamoPromptQueue(doc, tableName),
    events: new DynamoLifecycleEventLog(doc, tableName),
    connections: new DynamoConnectionRegistry(doc, tableName),
    proxies: new DynamoProxyConnectionRegistry(doc, tableName),
    snapshotDeletions: new DynamoSnapshotDeletionQueue(doc, tableName),
    // No relay runs here: the agent counts as watched (as in the flow harness); seize/release are real.
    relayLeases: {
      watched: () => Promise.resolve(true),
      seize: (sessionId, owner, now, ttl) => relayStore.seize(sessionId, owner, now, ttl),
      release: (lease) => relayStore.release(lease),
    },
    push: new RecordingPush(),
    // Counts idle-check arms on the way to the real scheduler (steps and the schedule target arm through here).
    scheduler: {
      arm: (target, at) => {
        if (target.purpose === "idle-check") {
          const list = arms.get(target.sessionId) ?? [];
          list.push({ armedFor: at.getTime() });
          arms.set(target.sessionId, list);
          // Delivered early, like EventBridge Scheduler's minute precision (see the header).
          const early = Math.floor(Math.random() * EARLY_MS);
          exactAt.set(scheduleName(target), at.toISOString());
          return scheduler.arm(target, new Date(Math.max(Date.now(), at.getTime() - early)));
        }
        return scheduler.arm(target, at);
      },
      cancel: (target) => scheduler.cancel(target),
    },
    flows: runner,
    provider: () => Promise.resolve(provider),
    agent: new ScriptedAgent(),
    sandboxKeys: staticKeyring("bench-master-key-0123456789abcdefghijklmnop"),
    secrets: new DynamoOrgSecretStore(doc, tableName, new LocalSecretKeyWrapper(randomBytes(32))),
    orgSettings: new DynamoOrgSettingsStore(doc, tableName),
    catalog: new DynamoRepoCatalog(doc, tableName),
    usage: new DynamoOrgUsageStore(doc, tableName),
    config,
    metrics,
    now: () => new Date(),
    logger,
  };
  const wsDeps: WsDeps = {
    ...built.deps,
    tokens: new DynamoApiTokenStore(doc, tableName),
    wsTickets: new DynamoWsTicketStore(doc, tableName),
    transcript: new DynamoTranscriptStore(doc, tableName),
    afterConnect: () => Promise.resolve(),
  };
  return {
    deps: built.deps,
    disconnect: makeDisconnectHandler(wsDeps),
    drained: async () => {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    config,
    runner,
    scheduler,
    metrics,
    firings,
    arms,
    get scheduleErrors() {
      return bench.scheduleErrors;
    },
    close: async () => {
      await runner.whenIdle();
      await scheduler.close();
      doc.destroy();
    },
  };
}

/** What the bench saw of one measured session. */
interface Tracked {
  id: string;
  connectionId: string;
  /** Set-up failed (the session is left out of the measured phase). */
  error: string | null;
  /** Around the $disconnect handler's call: its touchActivity lands in between. */
  disconnectCalled: number;
  disconnectReturned: number;
  disconnectStatus: number;
}

/** Starts a flow as the API does (lease read, then StartExecution) and waits for that execution. */
async function runFlow(b: Bench, flow: FlowName, sessionId: string): Promise<void> {
  const lease = await b.deps.sessions.readLease(sessionId);
  const { executionName } = await b.runner.start({ flow, sessionId, generation: lease?.fence ?? 0, actor: "bench" });
  await b.runner.executions.get(executionName)?.done;
}

/** Set-up: a session with one connected client (the $connect handler's write), made running as a first connect makes it. */
async function startConnected(b: Bench): Promise<Tracked> {
  const record = newSessionRecord({ id: newSessionId(), orgId: "org-bench", userId: "user-bench", provider: "local", now: new Date() });
  const connectionId = `conn-${record.id}`;
  const tracked: Tracked = { id: record.id, connectionId, error: null, disconnectCalled: 0, disconnectReturned: 0, disconnectStatus: 0 };
  try {
    await b.deps.sessions.createSession(record);
    await b.deps.connections.add({ connectionId, sessionId: record.id, userId: record.userId, clientType: "web", connectedAt: new Date().toISOString(), ready: true });
    await runFlow(b, "ensure-runtime", record.id);
    const session = await b.deps.sessions.getSession(record.id);
    if (session?.status !== "running") tracked.error = `ensure-runtime ended ${session?.status ?? "without the session"}`;
  } catch (err) {
    tracked.error = err instanceof Error ? err.message : String(err);
  }
  return tracked;
}

/** Runs `task` over `items`, at most `limit` at a time. */
async function pool<T, R>(items: T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await task(items[i] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** The measured event: the session's only client leaves ($disconnect). */
async function disconnect(b: Bench, t: Tracked): Promise<void> {
  t.disconnectCalled = Date.now();
  const result = await b.disconnect({ requestContext: { connectionId: t.connectionId, routeKey: "$disconnect", eventType: "DISCONNECT" } });
  t.disconnectReturned = Date.now();
  t.disconnectStatus = result.statusCode;
}

/** Idle snapshots settled (committed or failed) so far, from the metrics the Finish step publishes. */
function settledCount(b: Bench): number {
  return b.metrics.values(METRIC_NAMES.idleSnapshots).length + b.metrics.values(METRIC_NAMES.idleSnapshotFailures).length;
}

async function waitUntil(done: () => boolean, deadline: number): Promise<boolean> {
  while (!done()) {
    if (Date.now() > deadline) return false;
    await sleep(25);
  }
  return true;
}

/** Waits until no idle check is armed and no flow runs (set-up's checks have fired and found the client). */
async function quiesce(b: Bench, deadline: number): Promise<boolean> {
  const armed = () => b.scheduler.pending().some((p) => p.name.startsWith("idle-check-"));
  const settled = await waitUntil(() => !armed(), deadline);
  await b.runner.whenIdle();
  await b.drained();
  return settled;
}

async function auditEvents(b: Bench, sessionId: string): Promise<LifecycleEvent[]> {
  const items: LifecycleEvent[] = [];
  let cursor: string | null = null;
  do {
    const page = await b.deps.events.list(sessionId, { limit: 100, cursor });
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

function row(label: string, values: number[]): (string | number)[] {
  return [label, values.length, ms(percentile(values, 50)), ms(percentile(values, 99)), ms(values.length ? Math.max(...values) : Number.NaN), ms(mean(values))];
}

const sum = (map: Map<string, unknown[]>, ids: Iterable<string>) => [...ids].reduce((n, id) => n + (map.get(id)?.length ?? 0), 0);

export async function benchIdleLag(): Promise<void> {
  heading(`6. Idle-detection lag (grace expiry → idle snapshot start; event-driven idle checks, local scheduler)`);
  const startedAt = performance.now();
  const dynamo = await startDynamoChild();
  let b: Bench | null = null;
  try {
    b = startBench(dynamo.endpoint, dynamo.tableName);
    const bench = b;
    const graceMs = bench.config.IDLE_SNAPSHOT_DELAY_SECONDS * 1000;
    note(`dynalite child started in ${(performance.now() - startedAt).toFixed(0)} ms; local flow runner + local scheduler in this process; provider: instant (memory snapshots), agent: scripted, no relay`);

    // Warm-up, the whole path once per session (JIT, the ASL library, dynalite); left out.
    const warm = await pool(Array.from({ length: WARM_UP }), SETUP_CONCURRENCY, () => startConnected(bench));
    await Promise.all(warm.map((t) => disconnect(bench, t)));
    await waitUntil(() => settledCount(bench) >= WARM_UP, Date.now() + graceMs + SETTLE_TIMEOUT_MS);
    await bench.runner.whenIdle();

    // 1. Set-up.
    const setupStarted = Date.now();
    const all = await pool(Array.from({ length: N }), SETUP_CONCURRENCY, () => startConnected(bench));
    const tracked = all.filter((t) => !t.error);
    const ids = new Set(tracked.map((t) => t.id));
    const quiet = await quiesce(bench, Date.now() + graceMs + SETTLE_TIMEOUT_MS);
    const setupMs = Date.now() - setupStarted;
    const setupChecks = { armed: sum(bench.arms, ids), fired: sum(bench.firings, ids), snapshots: settledCount(bench) };
    bench.arms.clear();
    bench.firings.clear();
    const lagOffset = bench.metrics.values(METRIC_NAMES.idleLag).length;
    const settledOffset = settledCount(bench);

    // 2. Measured: the clients leave at even intervals over the spread.
    const spacingMs = (SPREAD_SECONDS * 1000) / tracked.length;
    const cpu0 = { bench: cpuMs(), dynamo: await dynamo.cpuMs() };
    const loadBefore = os.loadavg()[0] ?? 0;
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const t0 = Date.now() + 50;
    const leaving: Promise<void>[] = [];
    for (const [i, t] of tracked.entries()) {
      const wait = t0 + i * spacingMs - Date.now();
      if (wait > 0) await sleep(wait);
      leaving.push(disconnect(bench, t));
    }
    await Promise.all(leaving);
    const allSettled = await waitUntil(() => settledCount(bench) - settledOffset >= tracked.length, Date.now() + graceMs + SETTLE_TIMEOUT_MS);
    await bench.runner.whenIdle();
    const measuredMs = Date.now() - t0;
    loopDelay.disable();
    const cpu = { bench: cpuMs() - cpu0.bench, dynamo: (await dynamo.cpuMs()) - cpu0.dynamo };
    const loadAfter = os.loadavg()[0] ?? 0;

    // (a) What the Finish step published: begin.startedAt - begin.graceExpiresAt, where Begin
    // computed the grace expiry from the session it re-read under the lease.
    const metricLags = bench.metrics.values(METRIC_NAMES.idleLag).slice(lagOffset);

    // (b) From stored state, not through the metric's code: the idle-snapshot audit event's `at`
    // is its Begin step's startedAt (the snapshot's start), and the grace ran out at the
    // session's `lastActivityAt` + the web grace. `lastActivityAt` is read after the pause: only
    // touchActivity writes it, and the last to touch it was the $disconnect handler (checked: it
    // lies between the handler's call and its return), so it is the value the check and Begin saw.
    // The scheduler probe splits the lag: timer lateness, then the check and the flow's start.
    const storedLags: number[] = [];
    const timerLate: number[] = [];
    const firedToBegin: number[] = [];
    const status = new Map<string, number>();
    let paused = 0;
    let byIdleCheck = 0;
    let touchOutside = 0;
    let disconnectFailed = 0;
    const snapshotsStarted = [...bench.runner.executions.values()].filter((e) => e.flow === "idle-snapshot" && ids.has(e.input.sessionId)).length;
    for (const t of tracked) {
      if (t.disconnectStatus !== 200) disconnectFailed += 1;
      const session = await bench.deps.sessions.getSession(t.id);
      if (!session) continue;
      status.set(session.status, (status.get(session.status) ?? 0) + 1);
      if (session.status === "paused" && session.pauseReason === "inactivity") paused += 1;
      const touched = Date.parse(session.lastActivityAt);
      if (touched < t.disconnectCalled || touched > t.disconnectReturned) touchOutside += 1;
      const event = (await auditEvents(bench, t.id)).find((e) => e.flow === "idle-snapshot" && e.outcome === "committed");
      if (!event) continue;
      if (event.actor === "schedule:idle-check") byIdleCheck += 1;
      const begun = Date.parse(event.at);
      storedLags.push(begun - (touched + graceMs));
      // The firing that led to this snapshot: the last one delivered before Begin started.
      const firing = (bench.firings.get(t.id) ?? []).filter((f) => f.firedAt <= begun).at(-1);
      if (firing) {
        timerLate.push(firing.firedAt - firing.armedFor);
        firedToBegin.push(begun - firing.firedAt);
      }
    }
    const armed = sum(bench.arms, ids);
    const fired = sum(bench.firings, ids);

    note(
      `set-up: ${tracked.length} of ${N} sessions running with one client each in ${(setupMs / 1000).toFixed(1)} s (${SETUP_CONCURRENCY} at a time; ${WARM_UP} warm-up sessions before, left out)` +
        (all.length > tracked.length ? `; ! ${all.length - tracked.length} failed: ${all.find((t) => t.error)?.error ?? ""}` : ""),
    );
    note(`measured: the clients left one every ${spacingMs.toFixed(0)} ms over ${SPREAD_SECONDS} s; grace IDLE_SNAPSHOT_DELAY_SECONDS=${GRACE_SECONDS}; window ${(measuredMs / 1000).toFixed(1)} s`);
    note(
      `CPU in the window: this process ${(cpu.bench / 1000).toFixed(1)} s (${((cpu.bench / measuredMs) * 100).toFixed(0)}% of one core), dynalite ${(cpu.dynamo / 1000).toFixed(1)} s` +
        ` (${((cpu.dynamo / measuredMs) * 100).toFixed(0)}%); event-loop delay p50 ${ms(loopDelay.percentile(50) / 1e6)}, p99 ${ms(loopDelay.percentile(99) / 1e6)};` +
        ` machine load average ${loadBefore.toFixed(1)} → ${loadAfter.toFixed(1)} on ${os.cpus().length} CPU(s)`,
    );
    if (!quiet) note("! set-up's idle checks had not all fired before the measured phase started");
    if (!allSettled) note(`! not every idle snapshot settled within ${SETTLE_TIMEOUT_MS / 1000} s of the last disconnect: the figures cover those that did`);

    console.log("\n   a) Idle lag: grace expiry → idle snapshot start (Begin step, lease held)");
    table(
      ["figure", "n", "p50", "p99", "max", "mean"],
      [
        row("(a) IdleSnapshotLag metric (Finish step)", metricLags),
        row("(b) audit event at − (lastActivityAt + grace)", storedLags),
        row("    of which: delivered (fired − exact time; < 0 early)", timerLate),
        row("    of which: fired → Begin started (+ the flow's Wait)", firedToBegin),
        ["at dd49683: (b), checks on time, the target sleeping in the Lambda", AT_DD49683.n, ms(AT_DD49683.p50Ms), ms(AT_DD49683.p99Ms), ms(AT_DD49683.maxMs), ms(AT_DD49683.meanMs)],
      ],
    );
    // Issue 15: an early check no longer sleeps in the schedule target; the flow's Wait state waits.
    const earlyMs = timerLate.filter((d) => d < 0).map((d) => -d);
    const lambdaGbSecondsBefore = (mean(earlyMs.length ? earlyMs : [0]) / 1000) * (512 / 1024);
    note(
      `early deliveries: ${earlyMs.length} of ${timerLate.length} (mean ${ms(mean(earlyMs))}, max ${ms(earlyMs.length ? Math.max(...earlyMs) : 0)}); time the schedule target` +
        ` slept for them: 0 ms (before issue 15: the same ${ms(earlyMs.reduce((a, b) => a + b, 0))}, in the Lambda)`,
    );
    note(
      `AWS, per 1,000 idle checks delivered early by a mean 30 s (uniform within Scheduler's minute): before, 30 s × 512 MB of billed` +
        ` Lambda = $${((30 * 0.5 * 0.0000133334 * 1000) as number).toFixed(3)}; now one Wait state transition = $${(0.025).toFixed(3)}` +
        ` (here: ${(lambdaGbSecondsBefore * 1000).toFixed(1)} GB-s avoided per 1,000 checks at this bench's early spread).`,
    );
    note(`seed design (${SEED_POLL_SECONDS} s poll): up to ${(SEED_POLL_SECONDS * 1000).toLocaleString("en-US").replace(/,/g, " ")} ms`);
    note(
      `sessions paused (pauseReason inactivity): ${paused} of ${tracked.length}; end status ${[...status.entries()].map(([s, n]) => `${s}×${n}`).join(", ")};` +
        ` idle snapshots started by the idle-check schedule: ${byIdleCheck}`,
    );
    if (disconnectFailed || touchOutside || bench.scheduleErrors) {
      note(`! $disconnect failed ${disconnectFailed} time(s); lastActivityAt outside the $disconnect call on ${touchOutside}; schedule targets failed ${bench.scheduleErrors} time(s)`);
    }
    note("Fired → Begin started: the check's reads (session, clients, proxies, prompts; the lease), StartExecution, the Wait");
    note("until the exact time when the check came early, and Begin's lease write (loopback requests to dynalite); plus this");
    note("shared event loop.");

    console.log("\n   b) No polling: idle checks per session");
    table(
      ["phase", "sessions", "idle-check arms", "idle checks fired", "fired / session", "idle snapshots"],
      [
        ["set-up (client connected)", tracked.length, setupChecks.armed, setupChecks.fired, (setupChecks.fired / tracked.length).toFixed(2), setupChecks.snapshots - WARM_UP],
        ["measured (client left)", tracked.length, armed, fired, (fired / tracked.length).toFixed(2), snapshotsStarted],
      ],
    );
    note("Set-up: ensure-runtime's Finish arms a check for the grace expiry; it finds the client connected and re-arms nothing");
    note("(the client's leaving arms the next one). Measured: one check per session, when its grace runs out; arms beyond one per");
    note(`session would be re-arms (activity moved the expiry first). The seed's ${SEED_POLL_SECONDS} s poll checks every running session every`);
    note(`${SEED_POLL_SECONDS} s for as long as it runs: ${3600 / SEED_POLL_SECONDS} checks an hour per session, idle or busy.`);

    console.log("\n   Notes");
    note("AWS: EventBridge Scheduler has one-minute precision, so the stack arms idle checks for the start of the minute the");
    note("grace runs out in (functions/adapters/aws/eventbridge-lifecycle-scheduler.ts earlyAtExpression). The target judges");
    note("the session as of the exact time in its event and starts idle-snapshot at once with notBefore = that time; the");
    note("flow's first state (WaitUntilDue, a Wait) holds Begin until then and Begin re-checks the predicate under the lease.");
    note(`This bench delivers checks early by up to BENCH_IDLE_EARLY_MS=${EARLY_MS} ms to take that path; the local figure measures our`);
    note("own overhead: timer delivery, the predicate's reads, StartExecution, the Wait's timer and the Begin step's lease.");
    note("Local dynalite (a child process) and in-process flows: latency is not AWS latency (no cold starts, no real DynamoDB).");
  } finally {
    await b?.close();
    await dynamo.stop();
  }
}
