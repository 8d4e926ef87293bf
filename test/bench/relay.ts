/**
 * Section 5: the streaming relay (functions/relay/relay.ts, issues 5 and 15). Streams one relay
 * process holds (target 10,000 since issue 15), fan-out latency from an agent event to the client
 * frame (quiet, and while heartbeat rounds and a takeover run), relay memory per held stream,
 * DynamoDB requests per held stream and per relay in steady state, and their monthly cost.
 * Figures only, never assertions.
 *
 * The relay runs in this process with its real adapters: the DynamoDB stores, the OpenCode agent
 * client over HTTP, `agentMessages` answering `[]`, a flow runner that rejects (nothing here starts
 * a flow), and an in-process `ClientPush` that timestamps every frame (a socket per client would
 * measure ws, not the relay). Everything it talks to runs in child processes, as in AWS, so this
 * process's memory and event loop are the relay's alone:
 *   - relay-fake-opencode.ts: one HTTP server for all sandboxes (`/sb/<n>` per session), holding
 *     the SSE streams (`server.connected`, `server.heartbeat` every 10 s) and emitting turns on
 *     command, each text delta stamped with its emit time;
 *   - relay-dynalite.ts: dynalite with the project table.
 * Import this module only after the environment is set (it loads the runtime). Alone:
 *   POWERTOOLS_LOG_LEVEL=SILENT POWERTOOLS_METRICS_DISABLED=true AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true \
 *     npx tsx -e 'import("./test/bench/relay.ts").then((m) => m.benchRelay())'
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { fork, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram, type NodeGCPerformanceDetail } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import vm from "node:vm";
import { OpenCodeAgentClient } from "../../functions/agent/opencode-agent-client";
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import type { ClientPush, PushOutcome } from "../../functions/ports/client-push";
import type { FlowRunner } from "../../functions/ports/flow-runner";
import { StreamingRelay } from "../../functions/relay/relay";
import { EventTranslator } from "../../functions/relay/event-translator";
import type { AgentMessage } from "../../functions/relay/agent-messages";
import { createDocumentClient } from "../../functions/store/dynamo-client";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoConnectionRegistry, DynamoPromptQueue } from "../../functions/store/dynamo-session-items";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { buildSession } from "../support/builders";
import { countDynamoRequests, USD_PER_RRU, USD_PER_WRU, type DynamoRequest } from "./dynamo-usage";
import { heading, mib, note, percentile, table } from "./report";
import { parseConfig } from "../../functions/config/config";
import type { ChildCommand, ChildReply } from "./relay-fake-opencode";

/**
 * Held streams per step; the last is the target (issue 15: 10,000 in one relay process).
 * `BENCH_RELAY_STAGES=2000` (a comma list) runs smaller steps, e.g. to compare two builds' fan-out quickly on a busy machine.
 */
const STAGES = (process.env.BENCH_RELAY_STAGES?.split(",").map(Number).filter((n) => Number.isInteger(n) && n > 0) ?? []).sort((x, y) => x - y);
if (STAGES.length === 0) STAGES.push(2000, 10000);
const TARGET = 10000;
/** Sessions a dead relay leaves behind, taken over while fan-out is measured. */
const TAKEOVER = 500;
/**
 * This section at dd49683 (issue 15's figures, before the heartbeat): 2,000 streams, fan-out p99
 * 10.8 ms on a quiet machine; a renewal round (2,000 × UpdateItem + GetItem every 10 s) raised p99
 * to 580 ms vs 216 ms without on a loaded machine; 200 UpdateItem/s + 200 GetItem/s per 2,000
 * streams (360 requests per held stream per hour), ~$1,900 a month per 2,000 streams at $1.25/M WRU.
 */
const AT_DD49683 = { streams: 2000, p99QuietMs: 10.8, p99RoundLoadedMs: 580, p99NoRoundLoadedMs: 216, requestsPerStreamHour: 720, usdPerMonthPer2000: 1900 };
/** Stop increasing when a step degrades the process this much: 120 s per 2,000 streams added. */
const CLAIM_LIMIT_MS = 120_000;
const claimLimitMs = (added: number) => Math.max(CLAIM_LIMIT_MS, (added / 2000) * 2 * CLAIM_LIMIT_MS);
/** A step that opened at least this share of its target in time counts as reached (a few streams may still be connecting). */
const REACHED_SHARE = 0.95;
const LAG_P99_LIMIT_MS = 1_000;
/** Fan-out run: 400 turns of 5 text deltas = 2,000 measured events over ~10 s. */
const LOAD = { turns: 400, turnsPerSecond: 40, deltasPerTurn: 5, deltaGapMs: 25 };
const LEASE_TTL_SECONDS = 60;
/**
 * This section's figures before issue 21 (hand-written OpenCode client and SSE parser; now
 * `@opencode-ai/sdk` and `eventsource-parser`), same 2-CPU machine, run alone: the mean of two
 * runs, which themselves differed by up to ~10% (p50 1.69/1.52 ms, heartbeat 0.40/0.52 ms,
 * claim 11.58/13.67 ms CPU). Fan-out p99 and max follow dynalite, not the parser.
 */
const BEFORE_ISSUE_21 = { p50Ms: 1.61, p90Ms: 3.98, p99Ms: 61.88, relayCpuPct: 62.2, heartbeatCpuMs: 0.46, claimCpuMs: 12.63, heapPerStreamKiB: 34.45 };
const STEADY_MS = 20_000;

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
const clock = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Records what the relay logs instead of printing it: counts by message, and the system error codes it names. */
class CountingLogger extends Logger {
  readonly counts = new Map<string, number>();
  readonly codes = new Map<string, number>();

  override warn(...args: Parameters<Logger["warn"]>): void {
    this.count("warn", args);
  }
  override info(...args: Parameters<Logger["info"]>): void {
    this.count("info", args);
  }
  override error(...args: Parameters<Logger["error"]>): void {
    this.count("error", args);
  }

  private count(level: string, args: unknown[]): void {
    const [input] = args;
    const message = typeof input === "string" ? input : String((input as { message?: unknown } | undefined)?.message);
    // Routine lines (a claim per session) are not worth listing.
    if (level === "info" && message === "relay holds session") return;
    const key = `${level}: ${message}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    let text = "";
    try {
      text = JSON.stringify(args.slice(1));
    } catch {
      text = "";
    }
    for (const code of new Set(text.match(/\bE[A-Z]{3,}\b/g) ?? [])) this.codes.set(code, (this.codes.get(code) ?? 0) + 1);
  }
}

/** Hands frames to nobody, stamping text deltas' arrival against their emit time (child clock, corrected by `offsetMs`). */
class TimingPush implements ClientPush {
  /** Child clock minus this process's clock. */
  offsetMs = 0;
  measuring = false;
  frames = 0;
  readonly latencies: number[] = [];

  send(_connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    this.frames++;
    if (this.measuring && message.type === "message.part.text-delta") {
      const at = clock();
      const stamp = /t=([\d.]+);/.exec(String(message.delta));
      if (stamp) this.latencies.push(at - (Number(stamp[1]) - this.offsetMs));
    }
    return Promise.resolve("sent");
  }

  disconnect(): Promise<PushOutcome> {
    return Promise.resolve("gone");
  }
}

interface Child<R> {
  process: ChildProcess;
  ready: R;
  request<T extends { cmd: string }>(message: { cmd: string } & Record<string, unknown>, reply: T["cmd"], timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
}

/** Forks a TypeScript child (tsx) and waits for its `ready` message. */
async function startChild<R extends { cmd: string }>(script: string): Promise<Child<R>> {
  const child = fork(path.join(here, script), [], {
    cwd: repoRoot,
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<never>((_, reject) => child.once("exit", (code, signal) => reject(new Error(`${script} exited (${signal ?? code})`))));
  exited.catch(() => undefined);
  const waitFor = <T extends { cmd: string }>(cmd: string, timeoutMs: number): Promise<T> =>
    Promise.race([
      new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          child.off("message", listener);
          reject(new Error(`${script}: no "${cmd}" within ${timeoutMs} ms`));
        }, timeoutMs);
        const listener = (m: { cmd: string }) => {
          if (m.cmd !== cmd) return;
          clearTimeout(timer);
          child.off("message", listener);
          resolve(m as T);
        };
        child.on("message", listener);
      }),
      exited,
    ]);
  const ready = await waitFor<R>("ready", 60_000);
  return {
    process: child,
    ready,
    request: (message, reply, timeoutMs = 30_000) => {
      const answer = waitFor<never>(reply, timeoutMs);
      child.send(message);
      return answer;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      if (child.connected) child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
      await gone;
      clearTimeout(timer);
    },
  };
}

/** A forced full GC: `global.gc` under --expose-gc, else the V8 flag set at run time; null when neither works. */
function findGc(): { gc: (() => void) | null; how: string } {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === "function") return { gc: exposed as () => void, how: "global.gc (--expose-gc)" };
  try {
    v8.setFlagsFromString("--expose-gc");
    const fn: unknown = vm.runInNewContext("gc");
    if (typeof fn === "function") return { gc: fn as () => void, how: "no --expose-gc flag: gc exposed at run time with v8.setFlagsFromString('--expose-gc')" };
  } catch {
    // Fall through.
  }
  return { gc: null, how: "no forced GC available (--expose-gc not given): memory figures include uncollected garbage" };
}

interface Memory {
  rss: number;
  heapUsed: number;
  external: number;
}

async function memory(gc: (() => void) | null): Promise<Memory> {
  if (gc) {
    gc();
    await sleep(50);
    gc();
  }
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, external: m.external };
}

function openFds(): number {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return Number.NaN;
  }
}

function fdLimit(): string {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const [soft, hard] = line?.replace("Max open files", "").trim().split(/\s+/) ?? [];
    return soft ? `${soft} (hard ${hard})` : "unknown";
  } catch {
    return "unknown (no /proc/self/limits)";
  }
}

/** The relay task's size and session cap as infra/relay-service.ts sets them, when it still says so. */
function relayTaskSize(): { maxSessions: number; memoryMiB: number; cpu: number } | null {
  try {
    const source = readFileSync(path.join(repoRoot, "infra", "relay-service.ts"), "utf8");
    const num = (re: RegExp) => Number(re.exec(source)?.[1]?.replaceAll("_", ""));
    const maxSessions = num(/RELAY_MAX_SESSIONS = ([\d_]+)/);
    const memoryMiB = num(/RELAY_TASK_MEMORY_MIB = ([\d_]+)/);
    const cpu = num(/RELAY_TASK_CPU = ([\d_]+)/);
    return maxSessions && memoryMiB && cpu ? { maxSessions, memoryMiB, cpu } : null;
  } catch {
    return null;
  }
}

/**
 * Optional profiles of the relay process, written where the variable says (open them in Chrome DevTools):
 * - `BENCH_RELAY_PROFILE=<file.cpuprofile>`: CPU, during the takeover: what a claim spends its time on;
 * - `BENCH_RELAY_HEAP_PROFILE=<file.heapprofile>`: sampled allocations over the fan-out runs that
 *   outlived the young generation (those a scavenge collected are left out, those a major GC
 *   collected are kept): where the old generation's growth, and so the major GCs' marking, comes from.
 */
async function startProfile(kind: "cpu" | "heap"): Promise<{ stop: () => Promise<void> } | null> {
  const file = process.env[kind === "cpu" ? "BENCH_RELAY_PROFILE" : "BENCH_RELAY_HEAP_PROFILE"];
  if (!file) return null;
  const { Session } = await import("node:inspector/promises");
  const { writeFileSync } = await import("node:fs");
  const session = new Session();
  session.connect();
  if (kind === "cpu") {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 200 });
    await session.post("Profiler.start");
  } else {
    await session.post("HeapProfiler.enable");
    // The two include flags are in V8's protocol but not in Node's typings.
    await session.post("HeapProfiler.startSampling", { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: false } as never);
  }
  return {
    stop: async () => {
      const { profile } = kind === "cpu" ? await session.post("Profiler.stop") : await session.post("HeapProfiler.stopSampling");
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
      note(`${kind === "cpu" ? "CPU profile of the takeover" : "heap profile of the fan-out runs (promoted allocations)"} written to ${file}`);
    },
  };
}

/** Records the process's GC pauses (PerformanceObserver "gc") until `stop`. */
function watchGc(): { stop: () => { major: number[]; minor: number[] } } {
  const seen = { major: [] as number[], minor: [] as number[] };
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as unknown as { detail?: NodeGCPerformanceDetail }).detail?.kind;
      (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR ? seen.major : seen.minor).push(entry.duration);
    }
  });
  observer.observe({ entryTypes: ["gc"] });
  return {
    stop: () => {
      observer.disconnect();
      return seen;
    },
  };
}

/** Event-loop delay sampling interval: each sample is the time between two ticks of a timer this often. */
const LAG_RESOLUTION_MS = 10;

/** Loop delay beyond the sampling interval, in ms. */
function lagMs(h: IntervalHistogram): { p50: number; p99: number; max: number } {
  // Histogram values are nanoseconds; an empty histogram reports huge sentinels.
  if (h.count === 0) return { p50: 0, p99: 0, max: 0 };
  const beyond = (ns: number) => Math.max(0, ns / 1e6 - LAG_RESOLUTION_MS);
  return { p50: beyond(h.percentile(50)), p99: beyond(h.percentile(99)), max: beyond(h.max) };
}

function startLag(): IntervalHistogram {
  const h = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  h.enable();
  return h;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await fn(item);
      }
    }),
  );
}

const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "-");
const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : "-");
const kibPer = (bytes: number, n: number) => (n > 0 ? `${(bytes / n / 1024).toFixed(1)} KiB` : "-");
const thousands = (n: number) => n.toLocaleString("en-US");
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const pct = (cpuMs: number, ms: number) => `${f1((cpuMs / ms) * 100)}%`;

type FakeOpenCode = Child<Extract<ChildReply, { cmd: "ready" }>>;
type Dynalite = Child<{ cmd: "ready"; endpoint: string; tableName: string }>;

/** One measured stretch: wall time, CPU of this process and of each child, this process's event-loop lag. */
interface Window {
  ms: number;
  cpuMs: number;
  storeCpuMs: number;
  agentCpuMs: number;
  lag: { p50: number; p99: number; max: number };
}

async function measured<T>(children: { opencode: FakeOpenCode; dynamo: Dynalite }, fn: () => Promise<T>): Promise<{ value: T; window: Window }> {
  const stats = async () => {
    const [agent, store] = await Promise.all([
      children.opencode.request<Extract<ChildReply, { cmd: "stats" }>>({ cmd: "stats" } satisfies ChildCommand, "stats"),
      children.dynamo.request<{ cmd: "stats"; cpuMs: number }>({ cmd: "stats" }, "stats"),
    ]);
    return { agent: agent.cpuMs, store: store.cpuMs };
  };
  const before = await stats();
  const lag = startLag();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const value = await fn();
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  lag.disable();
  const after = await stats();
  return {
    value,
    window: { ms, cpuMs: (used.user + used.system) / 1000, storeCpuMs: after.store - before.store, agentCpuMs: after.agent - before.agent, lag: lagMs(lag) },
  };
}

interface StageResult {
  target: number;
  held: number;
  open: number;
  window: Window;
  mem: Memory;
  fds: number;
  stopped: string | null;
}

interface LoadResult {
  label: string;
  /** Garbage collections in the run: major (mark-compact) and minor (scavenge) pauses, ms. */
  gc: { major: number[]; minor: number[] };
  emitted: number;
  latencies: number[];
  frames: number;
  /** Connection-list Queries during the run. */
  connectionLists: number;
  noStream: number;
  lateStartP99Ms: number;
  sideMs: number | null;
  window: Window;
  /** DynamoDB requests sent during the run, by operation. */
  requests: Map<string, number>;
}

/** A session's history as OpenCode lists it: per turn a question, then an answer with a read tool call (~1.9 KB of output) and ~800 chars of text. */
function syntheticHistory(turns: number, n: number): AgentMessage[] {
  const out: AgentMessage[] = [];
  for (let t = 0; t < turns; t++) {
    const created = 1_700_000_000_000 + t * 10_000;
    out.push({ info: { id: `msg_${n}_${t}u`, role: "user", time: { created } }, parts: [{ id: `prt_${n}_${t}u`, type: "text", text: `question ${t} `.repeat(20) }] });
    out.push({
      info: { id: `msg_${n}_${t}a`, role: "assistant", time: { created: created + 1, completed: created + 5_000 } },
      parts: [
        { id: `prt_${n}_${t}t`, type: "tool", tool: "read", state: { status: "completed", title: "read", input: { path: `src/file${t}.ts` }, output: `line of code ${t};\n`.repeat(100) } },
        { id: `prt_${n}_${t}a`, type: "text", text: `answer ${t} `.repeat(80) },
      ],
    });
  }
  return out;
}

/**
 * Heap a held session's event translator keeps after catching up with its history (a claim, a
 * reconnect): the stream bench above answers every claim with no history, so this is measured
 * apart, per history length. At 81d8de0 it kept each message's whole transcript record as JSON
 * (text and tool output): 1.2 / 125.9 / 375.6 KiB per session at 0 / 25 / 100 turns.
 */
const TRANSLATOR_AT_81D8DE0: Record<number, number> = { 0: 1.2, 25: 125.9, 100: 375.6 };
async function translatorMemory(gc: (() => void) | null): Promise<void> {
  if (!gc) {
    note("translator memory by history: skipped (no forced GC available)");
    return;
  }
  const rows: (string | number)[][] = [];
  for (const turns of [0, 25, 100]) {
    const sessions = 300;
    const before = (await memory(gc)).heapUsed;
    let histories: AgentMessage[][] | null = Array.from({ length: sessions }, (_, i) => syntheticHistory(turns, i));
    const kept: EventTranslator[] = [];
    for (let i = 0; i < sessions; i++) {
      const translator = new EventTranslator({ sessionId: `ses_${i}`, agentSessionId: `ses_agent${i}` });
      translator.reconnected({ busy: false, messages: histories[i] ?? [] });
      kept.push(translator);
    }
    histories = null;
    const after = (await memory(gc)).heapUsed;
    const kib = (after - before) / kept.length / 1024;
    rows.push([turns, turns * 2, `${f1(kib)} KiB`, `${f1(TRANSLATOR_AT_81D8DE0[turns] ?? Number.NaN)} KiB`, thousands(Math.round((kib * TARGET) / 1024)) + " MiB"]);
  }
  console.log("\n   e) A held session's translator after catching up with its history (claim, reconnect): heap per session");
  table(["turns", "messages", "heap / session", "at 81d8de0", `× ${thousands(TARGET)} sessions`], rows);
  note("per turn: a ~250-char question, an answer with one read tool call (~1.9 KB of output) and ~800 chars of text. It now keeps a SHA-256 digest per record (to skip an unchanged one) instead of the record's JSON.");
}

export async function benchRelay(): Promise<void> {
  heading("5. Streaming relay (one relay process; fake OpenCode and dynalite in child processes)");
  const started = performance.now();
  const loadBefore = os.loadavg()[0] ?? Number.NaN;
  let connectionLists = 0;
  const { gc, how: gcHow } = findGc();
  const logger = new CountingLogger({ serviceName: "relay-bench", logLevel: "SILENT" });
  const push = new TimingPush();
  const noFlows: FlowRunner = { start: () => Promise.reject(new Error("no lifecycle flow expected in the relay bench")) };
  // The SDK warns (console.warn, at most every 15 s) when its socket pool (50) has a queue: counted, not printed.
  const sdkQueue = { warnings: 0, maxEnqueued: 0 };
  const consoleWarn = console.warn;
  console.warn = (...args: unknown[]) => {
    const queued = /socket usage at capacity=\d+ and (\d+) additional requests are enqueued/.exec(String(args[0]));
    if (!queued) return consoleWarn(...args);
    sdkQueue.warnings++;
    sdkQueue.maxEnqueued = Math.max(sdkQueue.maxEnqueued, Number(queued[1]));
  };
  let opencode: FakeOpenCode | null = null;
  let dynamo: Dynalite | null = null;
  let relay: StreamingRelay | null = null;
  let renewer: ReturnType<typeof setInterval> | null = null;
  let drained = false;
  let doc: ReturnType<typeof createDocumentClient> | null = null;
  try {
    // Settled one by one, so a child that started is stopped below even when the other failed.
    const [agentChild, storeChild] = await Promise.allSettled([startChild<FakeOpenCode["ready"]>("relay-fake-opencode.ts"), startChild<Dynalite["ready"]>("relay-dynalite.ts")]);
    opencode = agentChild.status === "fulfilled" ? agentChild.value : null;
    dynamo = storeChild.status === "fulfilled" ? storeChild.value : null;
    if (agentChild.status === "rejected") throw agentChild.reason;
    if (storeChild.status === "rejected") throw storeChild.reason;
    if (!opencode || !dynamo) throw new Error("child processes did not start");
    const children = { opencode, dynamo };
    const fake = opencode;
    const port = fake.ready.port;
    doc = createDocumentClient({ endpoint: dynamo.ready.endpoint });
    const tableName = dynamo.ready.tableName;
    const sessions = new DynamoSessionStore(doc, tableName);
    const connections = new DynamoConnectionRegistry(doc, tableName);
    // Connection-list Queries the fan-out makes (issue 25: read once per session, then again only on a join nudge or every 30 s).
    const listConnections = connections.list.bind(connections);
    connections.list = (sessionId) => {
      connectionLists++;
      return listConnections(sessionId);
    };
    const agent = new OpenCodeAgentClient();
    const live = new StreamingRelay(
      {
        sessions,
        prompts: new DynamoPromptQueue(doc, tableName),
        flows: noFlows,
        agent,
        // The fake OpenCode ignores the authorization: a key only so every claim derives one, as in production.
        sandboxKeys: staticKeyring("relay-bench-master-key-0123456789abcdef"),
        agentMessages: { listMessages: () => Promise.resolve([]) },
        connections,
        push,
        transcript: new DynamoTranscriptStore(doc, tableName),
        relayLeases: new DynamoRelayLeaseStore(doc, tableName),
        scheduler: { arm: () => Promise.resolve(), cancel: () => Promise.resolve() },
        config: parseConfig({ TABLE_NAME: tableName }),
        logger,
        now: () => new Date(),
      },
      { ownerId: "relay-bench", leaseTtlSeconds: LEASE_TTL_SECONDS, scanIntervalMs: 600_000, maxSessions: Math.max(...STAGES) + TAKEOVER },
    );
    relay = live;

    let created = 0;
    const ids: string[] = [];
    const createSessions = async (upTo: number) => {
      const numbers = Array.from({ length: upTo - created }, (_, i) => created + i);
      await pool(numbers, 32, async (n) => {
        const at = new Date().toISOString();
        const session = buildSession({
          status: "running",
          sandboxId: `sb-bench-${n}`,
          openCodeUrl: `http://127.0.0.1:${port}/sb/${n}`,
          codingAgentSessionId: `ses_bench${n}`,
          lastActivityAt: at,
        });
        await sessions.createSession(session);
        ids[n] = session.id;
        await connections.add({ connectionId: `conn-bench-${n}`, sessionId: session.id, userId: session.userId, clientType: "web", connectedAt: at, ready: true });
      });
      created = upTo;
    };

    // Warm what the first claim would load lazily (fetch's HTTP client, the agent client's schemas) before the baseline.
    const setupStarted = performance.now();
    await createSessions(STAGES[0] ?? 0);
    await agent.isBusy({ url: `http://127.0.0.1:${port}/sb/0`, authorization: null }, "ses_bench0");
    const baseline = await memory(gc);
    const baselineFds = openFds();
    let setupMs = performance.now() - setupStarted;

    // Every DynamoDB request the relay sends, with its capacity units (dynalite's consumed capacity).
    const requests: DynamoRequest[] = [];
    countDynamoRequests(doc, (r) => requests.push(r));
    // And, as each is sent, whether it touched the relays' own items (heartbeats: PK "RELAYS") or a session's.
    const relayOwn: boolean[] = [];
    {
      const client = doc as unknown as { send: (command: { input: Record<string, unknown> }) => Promise<unknown> };
      const inner = client.send.bind(client);
      client.send = (command) => {
        const key = command.input.Key as { PK?: unknown } | undefined;
        const values = command.input.ExpressionAttributeValues as Record<string, unknown> | undefined;
        relayOwn.push(key?.PK === "RELAYS" || values?.[":pk"] === "RELAYS");
        return inner(command);
      };
    }
    // Scans are driven here (the relay's scan timer is not started); heartbeats as the relay's timer does them, every ttl/3.
    const renewEveryMs = (LEASE_TTL_SECONDS * 1000) / 3;
    let lastRenewal: Promise<void> = Promise.resolve();
    renewer = setInterval(() => {
      lastRenewal = live.renewNow();
    }, renewEveryMs);

    const stages: StageResult[] = [];
    let stopReason: string | null = null;
    /** Where the last step started: the requests its claims (scans, claim writes, catch-ups) sent are counted from here. */
    let lastStageFrom = { requests: requests.length, open: 0 };
    for (const target of STAGES) {
      if (created < target) {
        const t = performance.now();
        await createSessions(target);
        setupMs += performance.now() - t;
      }
      const limitMs = claimLimitMs(target - live.streamCounters().open);
      lastStageFrom = { requests: requests.length, open: live.streamCounters().open };
      const { value: stopped, window } = await measured(children, async () => {
        const claimStarted = performance.now();
        while (live.streamCounters().open < target) {
          if (performance.now() - claimStarted > limitMs) return `not all ${thousands(target)} streams open within ${limitMs / 1000} s`;
          await live.scanNow();
          await sleep(100);
        }
        return null;
      });
      const why = (stopped && live.streamCounters().open < target * REACHED_SHARE ? stopped : null) ?? (window.lag.p99 > LAG_P99_LIMIT_MS ? `event-loop delay p99 ${f1(window.lag.p99)} ms > ${LAG_P99_LIMIT_MS} ms while claiming` : null);
      const counters = live.streamCounters();
      stages.push({ target, held: live.heldSessions().length, open: counters.open, window, mem: await memory(gc), fds: openFds(), stopped: why });
      if (why) {
        stopReason = `stopped at ${thousands(target)}: ${why}`;
        break;
      }
    }
    const top = stages.at(-1);
    const n = live.streamCounters().open;

    // One heartbeat round, timed, after any in flight and once every claimed stream has caught up (so nothing else sends
    // requests meanwhile): one UpdateItem (this relay's heartbeat) and one Query (its peers').
    const settleBy = performance.now() + 30_000;
    while (live.streamCounters().open < live.heldSessions().length && performance.now() < settleBy) await sleep(100);
    await lastRenewal;
    const tally = (from: number) => {
      const slice = requests.slice(from);
      const byOp = new Map<string, number>();
      for (const r of slice) byOp.set(r.op, (byOp.get(r.op) ?? 0) + 1);
      return { count: slice.length, rru: slice.reduce((a, r) => a + r.rru, 0), wru: slice.reduce((a, r) => a + r.wru, 0), byOp };
    };
    const claimRequests = tally(lastStageFrom.requests);
    const claimed = Math.max(1, n - lastStageFrom.open);
    let mark = requests.length;
    const { window: renewal } = await measured(children, () => live.renewNow());
    const heartbeatRound = tally(mark);
    // The periodic backstop (every RELAY_SCAN_INTERVAL_SECONDS): one page of the running sessions (`backstopNow`), every one held.
    mark = requests.length;
    const { window: backstopWindow } = await measured(children, () => live.backstopNow());
    const backstopRound = tally(mark);
    // A full scan (at start, when a peer dies or retires, after a lost heartbeat), every running session held: what it reads.
    mark = requests.length;
    const { window: scanWindow } = await measured(children, () => live.scanNow());
    const scanRound = tally(mark);
    // Steady state: agent heartbeats (one per stream every 10 s) and the relay's own heartbeat rounds; no scan, no nudge.
    mark = requests.length;
    const ownMark = relayOwn.length;
    const { window: steady } = await measured(children, () => sleep(STEADY_MS));
    const steadyTally = tally(mark);
    const steadyOwn = relayOwn.slice(ownMark);
    const steadySessionRequests = steadyOwn.filter((own) => !own).length;

    // Clock offset between the processes: the sample with the shortest IPC round trip.
    let best = { rtt: Number.POSITIVE_INFINITY, offset: 0 };
    for (let id = 0; id < 30; id++) {
      const sent = clock();
      const reply = await fake.request<Extract<ChildReply, { cmd: "clock" }>>({ cmd: "clock", id } satisfies ChildCommand, "clock");
      const back = clock();
      if (back - sent < best.rtt) best = { rtt: back - sent, offset: reply.at - (sent + back) / 2 };
    }
    push.offsetMs = best.offset;

    /** Turns across random held sessions; every text delta timed from its emit to the push. `side` starts 1 s in. */
    const runLoad = async (label: string, side?: () => Promise<void>): Promise<LoadResult> => {
      push.latencies.length = 0;
      const framesBefore = push.frames;
      const requestsBefore = requests.length;
      const listsBefore = connectionLists;
      push.measuring = true;
      const gcWatch = watchGc();
      let sideMs: number | null = null;
      const { value: done, window } = await measured(children, async () => {
        const loadDone = fake.request<Extract<ChildReply, { cmd: "loadDone" }>>({ cmd: "load", sandboxes: created, ...LOAD } satisfies ChildCommand, "loadDone", 120_000);
        const sideDone = side
          ? sleep(1_000).then(async () => {
              const t = performance.now();
              await side();
              sideMs = performance.now() - t;
            })
          : Promise.resolve();
        const result = await loadDone;
        const settleBy = performance.now() + 10_000;
        while (push.latencies.length < result.deltas && performance.now() < settleBy) await sleep(20);
        await sideDone;
        return result;
      });
      push.measuring = false;
      return {
        label,
        gc: gcWatch.stop(),
        emitted: done.deltas,
        latencies: [...push.latencies],
        frames: push.frames - framesBefore,
        connectionLists: connectionLists - listsBefore,
        noStream: done.noStream,
        lateStartP99Ms: done.lateStartP99Ms,
        sideMs,
        window,
        requests: tally(requestsBefore).byOp,
      };
    };
    // A dead relay's sessions: claimed by "relay-dead" (a heartbeat about to run out), taken over during the second run.
    const deadStart = created;
    await createSessions(created + TAKEOVER);
    const leasesStore = new DynamoRelayLeaseStore(doc, tableName);
    const dead = await leasesStore.register("relay-dead", new Date(), 600);
    await pool(ids.slice(deadStart, created), 16, async (id) => {
      const seen = await leasesStore.view(id);
      if (seen) await leasesStore.claim(seen, dead, new Date());
    });
    await live.renewNow(); // the relay sees relay-dead live
    // The quiet run has no heartbeat round (the periodic renewer stops here) and relay-dead stays
    // alive through it (600 s): before, relay-dead's last beat ran out before the quiet run and a
    // periodic round falling in it (every 20 s, the run lasts ~10 s) saw it dead and took over
    // there, so the quiet run sometimes measured the takeover. relay-dead dies in the second run.
    clearInterval(renewer);
    renewer = null;
    await lastRenewal;
    const heldBefore = live.heldSessions().length;
    const heapProfile = await startProfile("heap");
    const quietRun = await runLoad("quiet (no heartbeat round, no takeover)");
    // Heartbeat rounds alone (relay-dead still alive: nothing to take over), so their share of the fan-out is seen apart from the takeover's.
    const roundsRun = await runLoad("heartbeat rounds every 1 s, no takeover", async () => {
      const rounds = setInterval(() => void live.renewNow(), 1_000);
      try {
        await sleep(8_000);
      } finally {
        clearInterval(rounds);
        await live.renewNow();
      }
    });
    const takenOverInQuiet = live.heldSessions().length - heldBefore;
    const loads = [
      quietRun,
      roundsRun,
      await runLoad(`heartbeat rounds every 1 s + takeover of ${TAKEOVER} sessions of a dead relay, 1 s in`, async () => {
        const rounds = setInterval(() => void live.renewNow(), 1_000);
        try {
          // relay-dead's last beat ran out (an expiry in the past: it is dead from now on, never retired).
          await leasesStore.beat(dead, new Date(Date.now() - 600_000), 0);
          const profile = await startProfile("cpu");
          await live.renewNow(); // sees relay-dead gone: scans and claims its sessions
          const by = performance.now() + 60_000;
          while (live.streamCounters().open < heldBefore + TAKEOVER && performance.now() < by) await sleep(50);
          await profile?.stop();
        } finally {
          clearInterval(rounds);
        }
      }),
    ];
    const takenOver = live.heldSessions().length - heldBefore - takenOverInQuiet;
    await heapProfile?.stop();

    const childStats = await fake.request<Extract<ChildReply, { cmd: "stats" }>>({ cmd: "stats" } satisfies ChildCommand, "stats");
    const counters = { ...live.counters };
    const streamCounters = live.streamCounters();
    const drainStarted = performance.now();
    await live.drain();
    drained = true;
    const drainMs = performance.now() - drainStarted;

    // ---- report ----
    const reached = n >= TARGET && !stopReason;
    note(`held streams: ${thousands(n)} open (target ${thousands(TARGET)} on this ${os.cpus().length}-CPU machine: ${reached ? "reached" : "NOT reached"})${stopReason ? `; ${stopReason}` : ""}`);
    note(`set-up (session + connection items written to dynalite, not the relay's work): ${seconds(setupMs)}; forced GC before memory readings: ${gcHow}`);

    console.log(`\n   a) Held streams per step: scan + claim (lease, session read, SSE connect, status + messages, agent state write) until every stream is open`);
    table(
      ["streams", "held", "open", "claim time", "claims/s", "relay CPU / claim", "dynalite CPU", "loop delay p50", "p99", "max", "RSS", "heap used", "RSS Δ / stream", "RSS Δ / added", "heap Δ / stream", "fds"],
      stages.map((s, i) => {
        const previous = stages[i - 1];
        const added = s.open - (previous?.open ?? 0);
        return [
          thousands(s.target) + (s.target === TARGET ? ` (target ${thousands(TARGET)})` : ""),
          s.held,
          s.open,
          seconds(s.window.ms),
          `${f1(added / (s.window.ms / 1000))}/s`,
          `${f2(s.window.cpuMs / Math.max(1, added))} ms`,
          pct(s.window.storeCpuMs, s.window.ms),
          `${f1(s.window.lag.p50)} ms`,
          `${f1(s.window.lag.p99)} ms`,
          `${f1(s.window.lag.max)} ms`,
          mib(s.mem.rss),
          mib(s.mem.heapUsed),
          kibPer(s.mem.rss - baseline.rss, s.open),
          kibPer(s.mem.rss - (previous?.mem.rss ?? baseline.rss), added),
          kibPer(s.mem.heapUsed - baseline.heapUsed, s.open),
          s.fds,
        ];
      }),
    );
    note(
      `DynamoDB requests per claim (last step, ${thousands(claimed)} claims, its scan pages included, until every stream caught up): ${f2(claimRequests.count / claimed)} ` +
        `(${[...claimRequests.byOp.entries()].map(([op, c]) => `${op} ${f2(c / claimed)}`).join(", ")}); each ~135-180 KiB of SDK allocation in the relay.`,
    );
    note(`each step adds sessions to those already held; claims/s and CPU / claim are over the streams it added. Stop rule: claim > ${CLAIM_LIMIT_MS / 1000} s per 2,000 added or loop delay p99 > ${LAG_P99_LIMIT_MS} ms.`);
    note(`baseline before the first claim (runtime, SDK and fetch warm, after GC): RSS ${mib(baseline.rss)}, heap used ${mib(baseline.heapUsed)}, ${baselineFds} fds.`);
    note("Δ / stream: from the baseline over all held streams; Δ / added: from the previous step over the streams it added. RSS moves with the");
    note("allocator returning pages (noisy at small steps: read the largest step); heap used after GC is the steady figure.");
    note(`loop delay: event-loop delay beyond the ${LAG_RESOLUTION_MS} ms sampling interval (perf_hooks monitorEventLoopDelay), this process only.`);

    const ops = (t: ReturnType<typeof tally>) => [...t.byOp.entries()].map(([op, c]) => `${op} ×${c}`).join(", ") || "none";
    console.log(`\n   b) Steady state with ${thousands(n)} streams`);
    table(
      ["phase", "duration", "DynamoDB requests", "relay CPU", "dynalite CPU", "loop delay p50", "p99", "max"],
      (
        [
          [`steady: agent heartbeats (1 per stream / 10 s) + relay heartbeat rounds (every ${seconds(renewEveryMs)})`, steady, seconds(steady.ms), ops(steadyTally)],
          ["one relay heartbeat round (1 UpdateItem + 1 Query, whatever the streams)", renewal, seconds(renewal.ms), ops(heartbeatRound)],
          [`one backstop period (backstopNow: one page of 1,000), all ${thousands(n)} held`, backstopWindow, seconds(backstopWindow.ms), ops(backstopRound)],
          [`one full scan (start, a peer gone, a lost heartbeat; not periodic), all ${thousands(n)} held`, scanWindow, seconds(scanWindow.ms), ops(scanRound)],
        ] as [string, Window, string, string][]
      ).map(([label, w, duration, r]) => [label, duration, r, pct(w.cpuMs, w.ms), pct(w.storeCpuMs, w.ms), `${f1(w.lag.p50)} ms`, `${f1(w.lag.p99)} ms`, `${f1(w.lag.max)} ms`]),
    );
    // Per relay per hour: 360 heartbeat rounds and (at the default RELAY_SCAN_INTERVAL_SECONDS) the backstop periods, one page each.
    const scanIntervalS = parseConfig({ TABLE_NAME: tableName }).RELAY_SCAN_INTERVAL_SECONDS;
    const roundsPerHour = 3_600_000 / renewEveryMs;
    const scansPerHour = 3_600 / scanIntervalS;
    const hourly = (periodic: ReturnType<typeof tally>) => ({
      requests: roundsPerHour * heartbeatRound.count + scansPerHour * periodic.count,
      rru: roundsPerHour * heartbeatRound.rru + scansPerHour * periodic.rru,
      wru: roundsPerHour * heartbeatRound.wru + scansPerHour * periodic.wru,
    });
    const perHour = hourly(backstopRound);
    const steadyPerStreamHour = steadySessionRequests / Math.max(1, n) / (steady.ms / 3_600_000);
    const monthly = (h: ReturnType<typeof hourly>) => (h.rru * USD_PER_RRU + h.wru * USD_PER_WRU) * 730;
    const usdMonth = monthly(perHour);
    const usdMonthFullScans = monthly(hourly(scanRound));
    note(
      `DynamoDB requests per held stream per hour in steady state: ${f2(steadyPerStreamHour)} (${steadySessionRequests} requests on session items in ${seconds(steady.ms)}, ${steadyOwn.length - steadySessionRequests} on the relay's heartbeat items; at dd49683: ${AT_DD49683.requestsPerStreamHour}: an UpdateItem and a GetItem per stream every 10 s). ` +
        `Per relay per hour: ${thousands(Math.round(perHour.requests))} requests (${thousands(roundsPerHour)} heartbeat rounds × ${heartbeatRound.count}, ${thousands(scansPerHour)} backstop periods × ${backstopRound.count} at RELAY_SCAN_INTERVAL_SECONDS=${scanIntervalS}), ` +
        `${f1(perHour.rru)} RRU + ${f1(perHour.wru)} WRU.`,
    );
    note(
      `monthly DynamoDB cost of holding ${thousands(n)} streams in one relay (730 h, $1.25/M WRU, $0.25/M RRU): $${f2(usdMonth)} ` +
        `(at dd49683: ~$${thousands(AT_DD49683.usdPerMonthPer2000)} per ${thousands(AT_DD49683.streams)} streams, so ~$${thousands((AT_DD49683.usdPerMonthPer2000 * n) / AT_DD49683.streams)} for ${thousands(n)}). ` +
        `Were the period a full scan (${scanRound.count} pages) it would be $${f2(usdMonthFullScans)}. The backstop page dominates; its cost grows with the session item's size, not the running sessions ` +
        `(capacity from dynalite's item sizes; a real session item is bigger once it has a title, repos and settings).`,
    );
    note(`agent heartbeats: ${f2(steady.cpuMs / Math.max(1, (n * steady.ms) / 10_000))} ms of relay CPU each (all relay CPU in the steady window / agent heartbeats in it).`);

    console.log(`\n   c) Fan-out latency with ${thousands(n)} held streams: text delta written by the fake OpenCode → frame handed to ClientPush (one ready client per session)`);
    note(`load: ${LOAD.turns} turns at ${LOAD.turnsPerSecond}/s on random sessions, each busy → message.updated → ${LOAD.deltasPerTurn} deltas ${LOAD.deltaGapMs} ms apart → completed → idle`);
    table(
      ["run", "deltas emitted", "timed", "p50", "p90", "p99", "max", "relay CPU", "dynalite CPU", "loop delay p99", "max"],
      loads.map((l) => [
        l.label + (l.sideMs !== null ? ` (round took ${seconds(l.sideMs)})` : ""),
        l.emitted,
        l.latencies.length,
        `${f2(percentile(l.latencies, 50))} ms`,
        `${f2(percentile(l.latencies, 90))} ms`,
        `${f2(percentile(l.latencies, 99))} ms`,
        `${f2(l.latencies.length ? Math.max(...l.latencies) : Number.NaN)} ms`,
        pct(l.window.cpuMs, l.window.ms),
        pct(l.window.storeCpuMs, l.window.ms),
        `${f1(l.window.lag.p99)} ms`,
        `${f1(l.window.lag.max)} ms`,
      ]),
    );
    note(
      `frames pushed per run: ${loads.map((l) => l.frames).join(", ")} (create + deltas + finalize per turn); turns without an open stream: ${loads.map((l) => l.noStream).join(", ")}; ` +
        `emitter start lag p99: ${loads.map((l) => `${f2(l.lateStartP99Ms)} ms`).join(", ")}.`,
    );
    const quiet = loads[0];
    if (quiet && top) {
      const change = (now: number, before: number) => `${now >= before ? "+" : ""}${f1(((now - before) / before) * 100)}%`;
      const p50 = percentile(quiet.latencies, 50);
      const p90 = percentile(quiet.latencies, 90);
      const cpu = (quiet.window.cpuMs / quiet.window.ms) * 100;
      const heartbeat = steady.cpuMs / Math.max(1, (n * STEADY_MS) / 10_000);
      const claim = top.window.cpuMs / Math.max(1, top.open - (stages.at(-2)?.open ?? 0));
      const heap = (top.mem.heapUsed - baseline.heapUsed) / Math.max(1, top.open) / 1024;
      const b = BEFORE_ISSUE_21;
      note(
        `before issue 21 (hand-written client + SSE parser; run "${quiet.label}"): p50 ${f2(b.p50Ms)} ms (now ${change(p50, b.p50Ms)}), p90 ${f2(b.p90Ms)} ms (${change(p90, b.p90Ms)}), ` +
          `p99 ${f2(b.p99Ms)} ms, relay CPU ${f1(b.relayCpuPct)}% (${change(cpu, b.relayCpuPct)}); heartbeat ${f2(b.heartbeatCpuMs)} ms CPU (${change(heartbeat, b.heartbeatCpuMs)}), ` +
          `claim ${f2(b.claimCpuMs)} ms CPU (${change(claim, b.claimCpuMs)}), heap ${f1(b.heapPerStreamKiB)} KiB / stream (${change(heap, b.heapPerStreamKiB)}). Budget: +5%; runs of the same code differ by up to ~10%.`,
      );
    }
    const pauses = (ms: number[]) => (ms.length ? `×${ms.length}, max ${f1(Math.max(...ms))} ms, total ${f1(ms.reduce((a, b) => a + b, 0))} ms` : "none");
    if (quiet) {
      const turns = LOAD.turns - quiet.noStream;
      const total = [...quiet.requests.values()].reduce((x, y) => x + y, 0);
      note(
        `DynamoDB requests per turn (run "${quiet.label}", ${turns} turns): ${f2(total / Math.max(1, turns))} ` +
          `(${[...quiet.requests.entries()].map(([op, c]) => `${op} ${f2(c / Math.max(1, turns))}`).join(", ")}); before the idle boundary's one write (81d8de0, same run): 7.87 ` +
          "(UpdateItem 2.99: busy, activity, idle; PutItem 1.00: the answer; Query 2.88: prompts ×2 and the connection list at a session's first event; GetItem 1.00: the idle check's arm). " +
          "Each request costs the relay ~135-180 KiB of allocation in the SDK (a DynamoDB request's young garbage, most of this process's).",
      );
    }
    note(`GC pauses per run (PerformanceObserver "gc"): ${loads.map((l) => `${l.label.split(" (")[0]}: major ${pauses(l.gc.major)}; minor ${pauses(l.gc.minor)}`).join(" | ")}.`);
    note(`clock offset child − relay: ${f2(best.offset)} ms, corrected (best IPC round trip ${f2(best.rtt)} ms bounds its error). "timed" < emitted: frames not pushed within 10 s of the last emit.`);
    note("A session's events are handled one at a time; the turn's busy write (agent state) is off that path (awaited by the idle boundary), so a");
    note("turn's first deltas no longer wait on DynamoDB (dynalite here, queued behind the SDK's 50 sockets during a takeover's claims).");
    note(
      `connection-list Queries per run: ${loads.map((l) => `${l.connectionLists} for ${thousands(l.frames)} frames`).join(", ")} (issue 25: a session's list is read at its first event, ` +
        "then only after a join nudge, a listed connection's expiry, or 30 s; before, it was re-read once a second per streaming session, so a 10 s turn cost ~10 Queries, now 1 per 30 s).",
    );
    note(
      `quiet and heartbeat-only runs: ${takenOverInQuiet} sessions taken over in them (must be 0). takeover run: ${takenOver} sessions taken over from the dead relay while it ran (heartbeat rounds every 1 s instead of 10 s, so several fall in it). ` +
        `At dd49683 (${thousands(AT_DD49683.streams)} streams): p99 ${f1(AT_DD49683.p99QuietMs)} ms quiet; on a loaded machine ${AT_DD49683.p99RoundLoadedMs} ms during a per-stream renewal round vs ${AT_DD49683.p99NoRoundLoadedMs} ms without. Target: p99 <= 20 ms at 10,000.`,
    );

    console.log("\n   d) Notes");
    note(`relay counters: ${JSON.stringify(counters)}; streams: ${JSON.stringify(streamCounters)}`);
    note(
      `claim pacer (claim-pacer.ts: permits from a claim's write to its first catch-up, following the event loop's utilization): ` +
        `${thousands(live.pacer.stats.granted)} permits, ${thousands(live.pacer.stats.waited)} waited, limit between ${live.pacer.stats.lowestLimit} and ${live.pacer.stats.highestLimit}.`,
    );
    const logged = [...logger.counts.entries()].sort((a, b) => b[1] - a[1]);
    note(`relay log lines (counted, not printed): ${logged.length ? logged.map(([k, v]) => `${k} ×${v}`).join("; ") : "none besides one claim line per session"}`);
    note(
      sdkQueue.warnings
        ? `DynamoDB SDK socket pool (50) saturated: ${sdkQueue.warnings} warning(s) (at most one per 15 s), up to ${thousands(sdkQueue.maxEnqueued)} requests queued.`
        : "DynamoDB SDK socket pool (50): never reported saturated.",
    );
    note(`drain (close ${thousands(n + takenOver)} streams, retire the heartbeat: one write): ${seconds(drainMs)}. fake OpenCode child: ${childStats.streams} streams, RSS ${mib(childStats.rss)}.`);
    note(
      `fd limit (soft): ${fdLimit()}; ${top ? top.fds - baselineFds : "-"} fds added at ${thousands(top?.open ?? 0)} streams (one socket per stream).` +
        (logger.codes.size ? ` System errors logged: ${[...logger.codes.entries()].map(([k, v]) => `${k} ×${v}`).join(", ")}.` : " No EMFILE or other system error logged."),
    );
    if (logger.codes.has("EMFILE") || logger.codes.has("ENFILE")) {
      note("!! the process ran out of file descriptors: the relay task's nofile ulimit (ECS `ulimits`) must exceed RELAY_MAX_SESSIONS plus headroom.");
    }
    const task = relayTaskSize();
    if (task && top) {
      const perStream = (top.mem.rss - baseline.rss) / Math.max(1, top.open);
      note(
        `relay task (infra/relay-service.ts): ${task.cpu / 1024} vCPU, ${task.memoryMiB} MiB, RELAY_MAX_SESSIONS ${thousands(task.maxSessions)}; ` +
          `projected RSS at that cap: ${mib(baseline.rss + perStream * task.maxSessions)} (this baseline includes tsx; the bundled service's is smaller).`,
      );
    }
    note(
      `RSS excludes kernel socket buffers. All figures are loopback with both children running (load average ${f2(loadBefore)} at the start, ` +
        `${f2(os.loadavg()[0] ?? Number.NaN)} at the end, on ${os.cpus().length} CPUs: other work competes): ratios, not AWS latency.`,
    );
    await translatorMemory(gc);
    note(`section time ${seconds(performance.now() - started)}`);
  } finally {
    if (renewer) clearInterval(renewer);
    if (relay && !drained) await Promise.race([relay.drain().catch(() => undefined), sleep(30_000)]);
    doc?.destroy();
    await Promise.all([opencode?.stop(), dynamo?.stop()]);
    console.warn = consoleWarn;
  }
}
