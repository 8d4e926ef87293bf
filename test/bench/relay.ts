/**
 * Section 5: the streaming relay (functions/relay/relay.ts, issues 5 and 15). Streams one relay
 * process holds (target 10,000 since issue 15), fan-out latency from an agent event to the client
 * frame (quiet, and while heartbeat rounds and a takeover run), relay memory per held stream,
 * DynamoDB requests per held stream and per relay in steady state, and their monthly cost.
 * Figures only, never assertions.
 *
 * The relay runs in this process as the Fargate service runs it: `RELAY_WORKERS` relays, one per
 * worker thread (functions/relay/workers.ts; `BENCH_RELAY_WORKERS` overrides the count), each with
 * its real adapters (relay-worker.ts: the DynamoDB stores, the OpenCode agent client over HTTP, a
 * `ClientPush` that timestamps every frame). This thread only drives them and reports. Everything
 * they talk to runs in child processes, as in AWS, so this process's memory is the relay's alone:
 *   - relay-fake-opencode.ts: one HTTP server for all sandboxes (`/sb/<n>` per session), holding
 *     the SSE streams (`server.connected`, `server.heartbeat` every 10 s) and emitting turns on
 *     command, each text delta stamped with its emit time;
 *   - relay-dynalite.ts: dynalite with the project table.
 * Import this module only after the environment is set (it loads the runtime). Alone:
 *   POWERTOOLS_LOG_LEVEL=SILENT POWERTOOLS_METRICS_DISABLED=true AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true \
 *     npx tsx -e 'import("./test/bench/relay.ts").then((m) => m.benchRelay())'
 */
import { fork, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger } from "../../functions/observability/logger";
import { EventTranslator } from "../../functions/relay/event-translator";
import type { AgentMessage } from "../../functions/relay/agent-messages";
import { parseRelayEnv } from "../../functions/relay/service";
import { RelayWorkers } from "../../functions/relay/workers";
import { createDocumentClient } from "../../functions/store/dynamo-client";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoConnectionRegistry } from "../../functions/store/dynamo-session-items";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession } from "../support/builders";
import { USD_PER_RRU, USD_PER_WRU } from "./dynamo-usage";
import { findGc, LAG_RESOLUTION_MS, type BenchRequest, type BenchWorkerData, type CountedRequest, type Measured, type WorkerTotals } from "./relay-worker";
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
/**
 * The stand-ins' CPU priority (nice; `BENCH_RELAY_STANDIN_NICE`, 0 for the relay's): in AWS the
 * relay task has its vCPU to itself, and DynamoDB and the sandboxes are other machines. Here they
 * share two cores with it; at a lower priority they still do all their work, on the time the relay
 * leaves, and what the relay awaits from them only gets slower. Before 2026-11-28 they ran at the
 * relay's priority: the takeover's fan-out p99 then measured the two cores' contention as much as
 * the relay (README "Relay at scale").
 */
const STANDIN_NICE = Number(process.env.BENCH_RELAY_STANDIN_NICE ?? 10);
/**
 * A turn's first delta, p99 run by run (quiet / heartbeat rounds / takeover), at 609b10e: the
 * turn's first event read the connection list, and the delta (25 ms later) waited whenever that
 * Query took longer. Three runs with the stand-ins at nice 10, three at 0.
 */
const FIRST_DELTA_P99_AT_609B10E = { nice10: "11.4 / 3.2 / 17.6, 7.7 / 7.3 / 44.5, 3.0 / 10.9 / 12.1 ms", nice0: "9.8 / 13.7 / 32.4, 3.6 / 10.5 / 43.8, 16.1 / 9.5 / 38.5 ms" };

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
const clock = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
  // Every thread the child has by now (a thread started later inherits its starter's priority).
  if (STANDIN_NICE !== 0 && child.pid !== undefined) for (const tid of readdirSync(`/proc/${child.pid}/task`)) os.setPriority(Number(tid), STANDIN_NICE);
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

interface Memory {
  rss: number;
  heapUsed: number;
  external: number;
}

/** This thread's heap after a forced GC. */
async function ownHeap(gc: (() => void) | null): Promise<number> {
  if (gc) {
    gc();
    await sleep(50);
    gc();
  }
  return process.memoryUsage().heapUsed;
}

/** The process's RSS and the relays' heaps (every worker's, after a forced GC in each and here). */
async function memory(gc: (() => void) | null, relays: BenchRelays): Promise<Memory> {
  const heaps = await relays.all<number>({ cmd: "memory" });
  if (gc) {
    gc();
    await sleep(50);
    gc();
  }
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: heaps.reduce((a, b) => a + b, 0), external: m.external };
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
 * Optional profiles of the first relay worker, written where the variable says (open them in Chrome DevTools):
 * - `BENCH_RELAY_PROFILE=<file.cpuprofile>`: CPU, during the takeover (or the quiet run with
 *   `BENCH_RELAY_PROFILE_RUN=quiet`): what a claim, or the fan-out, spends its time on;
 * - `BENCH_RELAY_HEAP_PROFILE=<file.heapprofile>`: sampled allocations over the fan-out runs that
 *   outlived the young generation (those a scavenge collected are left out, those a major GC
 *   collected are kept): where the old generation's growth, and so the major GCs' marking, comes from.
 */
async function startProfile(kind: "cpu" | "heap", relays: BenchRelays): Promise<{ stop: () => Promise<void> } | null> {
  const file = process.env[kind === "cpu" ? "BENCH_RELAY_PROFILE" : "BENCH_RELAY_HEAP_PROFILE"];
  if (!file) return null;
  await relays.workers.requestOne(0, { cmd: "profileStart", kind, file } satisfies BenchRequest);
  return {
    stop: async () => {
      await relays.workers.requestOne(0, { cmd: "profileStop" } satisfies BenchRequest);
      note(`${kind === "cpu" ? "CPU profile" : "heap profile of the fan-out runs (promoted allocations)"} of relay worker 0 written to ${file}`);
    },
  };
}

/**
 * The relay process's workers as the bench drives them: each request goes to every worker, and
 * their answers are summed (streams, requests) or the worst is taken (loop delay).
 */
class BenchRelays {
  constructor(readonly workers: RelayWorkers<BenchWorkerData>) {}

  all<T>(body: BenchRequest): Promise<T[]> {
    return this.workers.request<T>(body);
  }

  async totals(): Promise<WorkerTotals & { perWorker: number[] }> {
    const all = await this.all<WorkerTotals>({ cmd: "totals" });
    const sum = (pick: (t: WorkerTotals) => Record<string, number>) => {
      const out: Record<string, number> = {};
      for (const t of all) for (const [k, v] of Object.entries(pick(t))) out[k] = (out[k] ?? 0) + v;
      return out;
    };
    const merge = (pick: (t: WorkerTotals) => [string, number][]) => {
      const out = new Map<string, number>();
      for (const t of all) for (const [k, v] of pick(t)) out.set(k, (out.get(k) ?? 0) + v);
      return [...out.entries()];
    };
    return {
      open: all.reduce((a, t) => a + t.open, 0),
      held: all.reduce((a, t) => a + t.held, 0),
      perWorker: all.map((t) => t.open),
      counters: sum((t) => t.counters),
      streams: sum((t) => t.streams),
      pacer: {
        granted: all.reduce((a, t) => a + t.pacer.granted, 0),
        waited: all.reduce((a, t) => a + t.pacer.waited, 0),
        highestLimit: Math.max(...all.map((t) => t.pacer.highestLimit)),
        lowestLimit: Math.min(...all.map((t) => t.pacer.lowestLimit)),
        lowestDuty: Math.min(...all.map((t) => t.pacer.lowestDuty)),
        spacedMs: all.reduce((sum, t) => sum + t.pacer.spacedMs, 0),
      },
      connectionLists: all.reduce((a, t) => a + t.connectionLists, 0),
      timed: all.reduce((a, t) => a + t.timed, 0),
      frames: all.reduce((a, t) => a + t.frames, 0),
      logged: merge((t) => t.logged),
      codes: merge((t) => t.codes),
      sdkQueue: { warnings: all.reduce((a, t) => a + t.sdkQueue.warnings, 0), maxEnqueued: Math.max(...all.map((t) => t.sdkQueue.maxEnqueued)) },
    };
  }

  async open(): Promise<number> {
    return (await this.all<number>({ cmd: "open" })).reduce((a, b) => a + b, 0);
  }

  async held(): Promise<number> {
    return (await this.totals()).held;
  }

  async each(cmd: "scanNow" | "renewNow" | "backstopNow"): Promise<void> {
    await this.all({ cmd });
  }

  /** The requests every worker sent since the last pull, appended to `into`; returns its new length. */
  async pull(into: CountedRequest[]): Promise<number> {
    for (const batch of await this.all<CountedRequest[]>({ cmd: "pull" })) into.push(...batch);
    return into.length;
  }

  /** The worst worker's loop delay over `fn`. */
  async lag<T>(fn: () => Promise<T>): Promise<{ value: T; lag: { p50: number; p99: number; max: number } }> {
    await this.all({ cmd: "lagStart" });
    const value = await fn();
    const all = await this.all<{ p50: number; p99: number; max: number }>({ cmd: "lagStop" });
    return { value, lag: { p50: Math.max(0, ...all.map((l) => l.p50)), p99: Math.max(0, ...all.map((l) => l.p99)), max: Math.max(0, ...all.map((l) => l.max)) } };
  }
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

/** `fn`, with the process's CPU (every thread), the children's, and the worst relay worker's loop delay. */
async function measured<T>(children: { opencode: FakeOpenCode; dynamo: Dynalite; relays: BenchRelays }, fn: () => Promise<T>): Promise<{ value: T; window: Window }> {
  const stats = async () => {
    const [agent, store] = await Promise.all([
      children.opencode.request<Extract<ChildReply, { cmd: "stats" }>>({ cmd: "stats" } satisfies ChildCommand, "stats"),
      children.dynamo.request<{ cmd: "stats"; cpuMs: number }>({ cmd: "stats" }, "stats"),
    ]);
    return { agent: agent.cpuMs, store: store.cpuMs };
  };
  const before = await stats();
  let cpu = process.cpuUsage();
  let started = performance.now();
  let ms = 0;
  let used = cpu;
  const { value, lag } = await children.relays.lag(async () => {
    cpu = process.cpuUsage();
    started = performance.now();
    const out = await fn();
    ms = performance.now() - started;
    used = process.cpuUsage(cpu);
    return out;
  });
  const after = await stats();
  return {
    value,
    window: { ms, cpuMs: (used.user + used.system) / 1000, storeCpuMs: after.store - before.store, agentCpuMs: after.agent - before.agent, lag },
  };
}

interface StageResult {
  target: number;
  held: number;
  open: number;
  window: Window;
  mem: Memory;
  /** Streams open per relay worker. */
  perWorker: number[];
  fds: number;
  stopped: string | null;
}

interface LoadResult {
  label: string;
  /** Garbage collections in the run: major (mark-compact) and minor (scavenge) pauses, ms. */
  gc: { major: number[]; minor: number[] };
  emitted: number;
  latencies: number[];
  /** Each message's first text delta (also in `latencies`). */
  firstLatencies: number[];
  /** How long the connection-list Queries took. */
  listMs: number[];
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
    const before = await ownHeap(gc);
    let histories: AgentMessage[][] | null = Array.from({ length: sessions }, (_, i) => syntheticHistory(turns, i));
    const kept: EventTranslator[] = [];
    for (let i = 0; i < sessions; i++) {
      const translator = new EventTranslator({ sessionId: `ses_${i}`, agentSessionId: `ses_agent${i}` });
      translator.reconnected({ busy: false, messages: histories[i] ?? [] });
      kept.push(translator);
    }
    histories = null;
    const after = await ownHeap(gc);
    const kib = (after - before) / kept.length / 1024;
    rows.push([turns, turns * 2, `${f1(kib)} KiB`, `${f1(TRANSLATOR_AT_81D8DE0[turns] ?? Number.NaN)} KiB`, thousands(Math.round((kib * TARGET) / 1024)) + " MiB"]);
  }
  console.log("\n   e) A held session's translator after catching up with its history (claim, reconnect): heap per session");
  table(["turns", "messages", "heap / session", "at 81d8de0", `× ${thousands(TARGET)} sessions`], rows);
  note("per turn: a ~250-char question, an answer with one read tool call (~1.9 KB of output) and ~800 chars of text. It now keeps a SHA-256 digest per record (to skip an unchanged one) instead of the record's JSON.");
}

export async function benchRelay(): Promise<void> {
  heading("5. Streaming relay (one relay process of RELAY_WORKERS worker threads; fake OpenCode and dynalite in child processes)");
  const started = performance.now();
  const loadBefore = os.loadavg()[0] ?? Number.NaN;
  const { gc, how: gcHow } = findGc();
  const workerCount = Number(process.env.BENCH_RELAY_WORKERS ?? parseRelayEnv({}).RELAY_WORKERS);
  let opencode: FakeOpenCode | null = null;
  let dynamo: Dynalite | null = null;
  let workers: RelayWorkers<BenchWorkerData> | null = null;
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
    const fake = opencode;
    const port = fake.ready.port;
    doc = createDocumentClient({ endpoint: dynamo.ready.endpoint });
    const tableName = dynamo.ready.tableName;
    const sessions = new DynamoSessionStore(doc, tableName);
    const connections = new DynamoConnectionRegistry(doc, tableName);
    // The relay process's share per worker, as the service splits RELAY_MAX_SESSIONS, with room for the takeover.
    const capacity = Math.max(...STAGES) + TAKEOVER;
    const maxSessions = Math.ceil((capacity * 1.25) / workerCount);
    const endpoint = dynamo.ready.endpoint;
    workers = new RelayWorkers<BenchWorkerData>({
      count: workerCount,
      script: new URL("./relay-worker.ts", import.meta.url),
      data: (index) => ({ index, count: workerCount, ownerId: `relay-bench-w${index}`, maxSessions, endpoint, tableName, leaseTtlSeconds: LEASE_TTL_SECONDS, agentPort: port }),
      logger: createLogger("relay-bench"),
      drainTimeoutMs: 60_000,
    });
    await workers.start();
    const live = new BenchRelays(workers);
    const children = { opencode, dynamo, relays: live };

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
    await live.all({ cmd: "warm" });
    const baseline = await memory(gc, live);
    const baselineFds = openFds();
    let setupMs = performance.now() - setupStarted;

    // Every DynamoDB request the relays send, with its capacity units (dynalite's consumed capacity) and whether it
    // touched the relays' own items (heartbeats: PK "RELAYS") or a session's: pulled from the workers before each count.
    const requests: CountedRequest[] = [];
    await live.pull([]);
    // Scans are driven here (the relay's scan timer is not started); heartbeats as the relay's timer does them, every ttl/3.
    const renewEveryMs = (LEASE_TTL_SECONDS * 1000) / 3;
    let lastRenewal: Promise<void> = Promise.resolve();
    renewer = setInterval(() => {
      lastRenewal = live.each("renewNow");
    }, renewEveryMs);

    const stages: StageResult[] = [];
    let stopReason: string | null = null;
    /** Where the last step started: the requests its claims (scans, claim writes, catch-ups) sent are counted from here. */
    let lastStageFrom = { requests: await live.pull(requests), open: 0 };
    for (const target of STAGES) {
      if (created < target) {
        const t = performance.now();
        await createSessions(target);
        setupMs += performance.now() - t;
      }
      const openBefore = await live.open();
      const limitMs = claimLimitMs(target - openBefore);
      lastStageFrom = { requests: await live.pull(requests), open: openBefore };
      const { value: stopped, window } = await measured(children, async () => {
        const claimStarted = performance.now();
        while ((await live.open()) < target) {
          if (performance.now() - claimStarted > limitMs) return `not all ${thousands(target)} streams open within ${limitMs / 1000} s`;
          await live.each("scanNow");
          await sleep(100);
        }
        return null;
      });
      const totals = await live.totals();
      const why = (stopped && totals.open < target * REACHED_SHARE ? stopped : null) ?? (window.lag.p99 > LAG_P99_LIMIT_MS ? `event-loop delay p99 ${f1(window.lag.p99)} ms > ${LAG_P99_LIMIT_MS} ms while claiming` : null);
      stages.push({ target, held: totals.held, open: totals.open, perWorker: totals.perWorker, window, mem: await memory(gc, live), fds: openFds(), stopped: why });
      if (why) {
        stopReason = `stopped at ${thousands(target)}: ${why}`;
        break;
      }
    }
    const top = stages.at(-1);
    const n = await live.open();

    // One heartbeat round, timed, after any in flight and once every claimed stream has caught up (so nothing else sends
    // requests meanwhile): one UpdateItem (this relay's heartbeat) and one Query (its peers').
    const settleBy = performance.now() + 30_000;
    for (let t = await live.totals(); t.open < t.held && performance.now() < settleBy; t = await live.totals()) await sleep(100);
    await lastRenewal;
    await live.pull(requests);
    const tally = (from: number) => {
      const slice = requests.slice(from);
      const byOp = new Map<string, number>();
      for (const r of slice) byOp.set(r.op, (byOp.get(r.op) ?? 0) + 1);
      return { count: slice.length, rru: slice.reduce((a, r) => a + r.rru, 0), wru: slice.reduce((a, r) => a + r.wru, 0), byOp };
    };
    const claimRequests = tally(lastStageFrom.requests);
    const claimed = Math.max(1, n - lastStageFrom.open);
    let mark = await live.pull(requests);
    const { window: renewal } = await measured(children, () => live.each("renewNow"));
    await live.pull(requests);
    const heartbeatRound = tally(mark);
    // The periodic backstop (every RELAY_SCAN_INTERVAL_SECONDS): one page of the running sessions (`backstopNow`), every one held.
    mark = requests.length;
    const { window: backstopWindow } = await measured(children, () => live.each("backstopNow"));
    await live.pull(requests);
    const backstopRound = tally(mark);
    // A full scan (at start, when a peer dies or retires, after a lost heartbeat), every running session held: what it reads.
    mark = requests.length;
    const { window: scanWindow } = await measured(children, () => live.each("scanNow"));
    await live.pull(requests);
    const scanRound = tally(mark);
    // Steady state: agent heartbeats (one per stream every 10 s) and the relay's own heartbeat rounds; no scan, no nudge.
    mark = requests.length;
    const { window: steady } = await measured(children, () => sleep(STEADY_MS));
    await live.pull(requests);
    const steadyTally = tally(mark);
    const steadyOwn = requests.slice(mark).map((r) => r.own);
    const steadySessionRequests = steadyOwn.filter((own) => !own).length;

    // Clock offset between the processes: the sample with the shortest IPC round trip.
    let best = { rtt: Number.POSITIVE_INFINITY, offset: 0 };
    for (let id = 0; id < 30; id++) {
      const sent = clock();
      const reply = await fake.request<Extract<ChildReply, { cmd: "clock" }>>({ cmd: "clock", id } satisfies ChildCommand, "clock");
      const back = clock();
      if (back - sent < best.rtt) best = { rtt: back - sent, offset: reply.at - (sent + back) / 2 };
    }

    /** Turns across random held sessions; every text delta timed from its emit to the push. `side` starts 1 s in. */
    const runLoad = async (label: string, side?: () => Promise<void>): Promise<LoadResult> => {
      const before = await live.totals();
      const requestsBefore = await live.pull(requests);
      await live.all({ cmd: "measureStart", offsetMs: best.offset });
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
        // The frames of the last deltas: until every emitted delta was timed (or 10 s passed).
        for (let t = await live.totals(); t.timed < result.deltas && performance.now() < settleBy; t = await live.totals()) await sleep(20);
        await sideDone;
        return result;
      });
      const measuredBy = await live.all<Measured>({ cmd: "measureStop" });
      const after = await live.totals();
      await live.pull(requests);
      return {
        label,
        gc: { major: measuredBy.flatMap((m) => m.gc.major), minor: measuredBy.flatMap((m) => m.gc.minor) },
        emitted: done.deltas,
        latencies: measuredBy.flatMap((m) => m.latencies),
        firstLatencies: measuredBy.flatMap((m) => m.firstLatencies),
        listMs: measuredBy.flatMap((m) => m.listMs),
        frames: after.frames - before.frames,
        connectionLists: after.connectionLists - before.connectionLists,
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
    await live.each("renewNow"); // the relays see relay-dead live
    // The quiet run has no heartbeat round (the periodic renewer stops here) and relay-dead stays
    // alive through it (600 s): before, relay-dead's last beat ran out before the quiet run and a
    // periodic round falling in it (every 20 s, the run lasts ~10 s) saw it dead and took over
    // there, so the quiet run sometimes measured the takeover. relay-dead dies in the second run.
    clearInterval(renewer);
    renewer = null;
    await lastRenewal;
    const heldBefore = await live.held();
    const heapProfile = await startProfile("heap", live);
    const quietProfile = process.env.BENCH_RELAY_PROFILE_RUN === "quiet" ? await startProfile("cpu", live) : null;
    const quietRun = await runLoad("quiet (no heartbeat round, no takeover)");
    await quietProfile?.stop();
    // Heartbeat rounds alone (relay-dead still alive: nothing to take over), so their share of the fan-out is seen apart from the takeover's.
    const roundsRun = await runLoad("heartbeat rounds every 1 s, no takeover", async () => {
      const rounds = setInterval(() => void live.each("renewNow"), 1_000);
      try {
        await sleep(8_000);
      } finally {
        clearInterval(rounds);
        await live.each("renewNow");
      }
    });
    const takenOverInQuiet = (await live.held()) - heldBefore;
    const loads = [
      quietRun,
      roundsRun,
      await runLoad(`heartbeat rounds every 1 s + takeover of ${TAKEOVER} sessions of a dead relay, 1 s in`, async () => {
        const rounds = setInterval(() => void live.each("renewNow"), 1_000);
        try {
          // relay-dead's last beat ran out (an expiry in the past: it is dead from now on, never retired).
          await leasesStore.beat(dead, new Date(Date.now() - 600_000), 0);
          const profile = process.env.BENCH_RELAY_PROFILE_RUN === "quiet" ? null : await startProfile("cpu", live);
          await live.each("renewNow"); // the relays see relay-dead gone: each scans and claims its sessions
          const by = performance.now() + 60_000;
          while ((await live.open()) < heldBefore + TAKEOVER && performance.now() < by) await sleep(50);
          await profile?.stop();
        } finally {
          clearInterval(rounds);
        }
      }),
    ];
    const takenOver = (await live.held()) - heldBefore - takenOverInQuiet;
    await heapProfile?.stop();

    const childStats = await fake.request<Extract<ChildReply, { cmd: "stats" }>>({ cmd: "stats" } satisfies ChildCommand, "stats");
    const finalTotals = await live.totals();
    const counters = finalTotals.counters;
    const streamCounters = finalTotals.streams;
    const drainStarted = performance.now();
    await workers.drain();
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
        `(${[...claimRequests.byOp.entries()].map(([op, c]) => `${op} ${f2(c / claimed)}`).join(", ")}); each ~135-180 KiB of SDK allocation in the relay. ` +
        "At 609b10e: 3.03 (no connection list: a turn's first event read it, and its first delta waited for that Query); at 1681e77: 6.02 (GetItem 1, Query 3: the connection list and the prompts twice); 7.04 before it.",
    );
    note(`streams per relay worker at each step: ${stages.map((st) => `${thousands(st.target)}: ${st.perWorker.map(thousands).join(" / ")}`).join("; ")} (each claims its own share of a scan first).`);
    note(`each step adds sessions to those already held; claims/s and CPU / claim are over the streams it added. Stop rule: claim > ${CLAIM_LIMIT_MS / 1000} s per 2,000 added or loop delay p99 > ${LAG_P99_LIMIT_MS} ms.`);
    note(`baseline before the first claim (runtime, SDK and fetch warm, after GC): RSS ${mib(baseline.rss)}, heap used ${mib(baseline.heapUsed)}, ${baselineFds} fds.`);
    note("Δ / stream: from the baseline over all held streams; Δ / added: from the previous step over the streams it added. RSS moves with the");
    note("allocator returning pages (noisy at small steps: read the largest step); heap used after GC is the steady figure.");
    note(`loop delay: event-loop delay beyond the ${LAG_RESOLUTION_MS} ms sampling interval (perf_hooks monitorEventLoopDelay), the worst relay worker's.`);

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
    // Per relay process per hour: its heartbeat rounds (one write and one read per worker) and, at the default
    // RELAY_SCAN_INTERVAL_SECONDS, the backstop periods (one page per worker each).
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
        `Per relay process (${workerCount} workers) per hour: ${thousands(Math.round(perHour.requests))} requests (${thousands(roundsPerHour)} heartbeat rounds × ${heartbeatRound.count}, ${thousands(scansPerHour)} backstop periods × ${backstopRound.count} (a page per worker) at RELAY_SCAN_INTERVAL_SECONDS=${scanIntervalS}), ` +
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
      `connection-list Queries per run: ${loads.map((l) => `${l.connectionLists} for ${thousands(l.frames)} frames`).join(", ")} (issue 25: a session's list is read when it is claimed, ` +
        "then only after a join nudge, a listed connection's expiry, or 30 s; before, it was re-read once a second per streaming session, so a 10 s turn cost ~10 Queries, now 1 per 30 s). " +
        `They took p50 / p99 ${loads.map((l) => `${f1(percentile(l.listMs, 50))} / ${f1(percentile(l.listMs, 99))} ms`).join(", ")}; no frame waits for one but a listed connection's expiry (the claim's read is awaited only by a first frame that comes before it is back; the 30 s re-read runs beside the frames).`,
    );
    note(
      `a turn's first delta (its message's first, 25 ms after the turn's first event), p99 per run: ${loads.map((l) => `${f2(percentile(l.firstLatencies, 99))} ms`).join(" / ")}; ` +
        `at 609b10e, when the turn's first event read the connection list: ${FIRST_DELTA_P99_AT_609B10E.nice10} (stand-ins at nice 10), ${FIRST_DELTA_P99_AT_609B10E.nice0} (at 0).`,
    );
    note(
      `quiet and heartbeat-only runs: ${takenOverInQuiet} sessions taken over in them (must be 0). takeover run: ${takenOver} sessions taken over from the dead relay while it ran (heartbeat rounds every 1 s instead of 10 s, so several fall in it). ` +
        `At dd49683 (${thousands(AT_DD49683.streams)} streams): p99 ${f1(AT_DD49683.p99QuietMs)} ms quiet; on a loaded machine ${AT_DD49683.p99RoundLoadedMs} ms during a per-stream renewal round vs ${AT_DD49683.p99NoRoundLoadedMs} ms without. Target: p99 <= 20 ms at 10,000. ` +
        "At 1681e77 (workers, each full-scanning when a peer died; same machine and day): 4.2 / 6.1 / 93.9 ms (quiet / rounds / takeover). " +
        "At c14abaa (no fewer than one claim at a time per worker, nothing spaced), paired runs on a noisier day: takeover 71.8, 64.0, 31.7, 29.3 ms (with spacing: 16.6, 32.4, 19.7, 15.5 ms); the takeover took 5.2-7.1 s (with spacing 7.4-9.6 s). " +
        "At 609b10e (the turn's first event read the connection list), alternating runs on 2026-11-28, quiet / rounds / takeover: stand-ins at nice 10: 4.6 / 5.3 / 8.4, 6.8 / 4.3 / 17.0, 3.3 / 9.1 / 10.6 ms; at nice 0: 9.7 / 8.1 / 24.0, 4.1 / 11.3 / 21.3, 12.1 / 6.0 / 22.2 ms.",
    );
    note(
      `the stand-ins (dynalite, the fake OpenCode) ran at nice ${STANDIN_NICE} (BENCH_RELAY_STANDIN_NICE; the relay at 0): in AWS the relay's vCPU is its own and they are other machines. ` +
        "At the relay's priority they take the cores it needs in the takeover, where the machine is saturated.",
    );

    console.log("\n   d) Notes");
    note(`relay counters: ${JSON.stringify(counters)}; streams: ${JSON.stringify(streamCounters)}`);
    note(
      `claim pacer (claim-pacer.ts: permits from a claim's write to its first catch-up, following the event loop's utilization and the machine's CPUs): ` +
        `${thousands(finalTotals.pacer.granted)} permits, ${thousands(finalTotals.pacer.waited)} waited, limit between ${finalTotals.pacer.lowestLimit} and ${finalTotals.pacer.highestLimit} (per worker); at one permit, the share of the time it may be held went down to ${f2(finalTotals.pacer.lowestDuty)} (claims spaced ${seconds(finalTotals.pacer.spacedMs)} in all, over the workers).`,
    );
    const logged = [...finalTotals.logged].sort((a, b) => b[1] - a[1]);
    const codes = new Map(finalTotals.codes);
    const sdkQueue = finalTotals.sdkQueue;
    note(`relay log lines (counted, not printed): ${logged.length ? logged.map(([k, v]) => `${k} ×${v}`).join("; ") : "none besides one claim line per session"}`);
    note(
      sdkQueue.warnings
        ? `DynamoDB SDK socket pool (50) saturated: ${sdkQueue.warnings} warning(s) (at most one per 15 s), up to ${thousands(sdkQueue.maxEnqueued)} requests queued.`
        : "DynamoDB SDK socket pool (50): never reported saturated.",
    );
    note(`drain (close ${thousands(n + takenOver)} streams, retire the heartbeat: one write): ${seconds(drainMs)}. fake OpenCode child: ${childStats.streams} streams, RSS ${mib(childStats.rss)}.`);
    note(
      `fd limit (soft): ${fdLimit()}; ${top ? top.fds - baselineFds : "-"} fds added at ${thousands(top?.open ?? 0)} streams (one socket per stream).` +
        (codes.size ? ` System errors logged: ${[...codes.entries()].map(([k, v]) => `${k} ×${v}`).join(", ")}.` : " No EMFILE or other system error logged."),
    );
    if (codes.has("EMFILE") || codes.has("ENFILE")) {
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
    if (workers && !drained) await Promise.race([workers.drain().catch(() => undefined), sleep(30_000)]);
    doc?.destroy();
    await Promise.all([opencode?.stop(), dynamo?.stop()]);
  }
}
