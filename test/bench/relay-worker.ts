/**
 * Bench section 5's relay: what one worker thread of the relay process runs (functions/relay/workers.ts,
 * as the Fargate service runs `RELAY_WORKERS` of them), with the bench's adapters instead of AWS's:
 * the DynamoDB stores on dynalite (every request counted), the OpenCode agent client over HTTP to
 * the fake OpenCode, `agentMessages` answering `[]`, a flow runner that rejects (nothing here
 * starts a flow), and an in-process `ClientPush` that timestamps every text delta (a socket per
 * client would measure ws, not the relay).
 *
 * The relay's timers are not started: the bench drives scans and heartbeat rounds through
 * `request` (relay.ts), and reads back latencies, requests, GC pauses, loop delay and heap.
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram, type NodeGCPerformanceDetail } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";
import { OpenCodeAgentClient } from "../../functions/agent/opencode-agent-client";
import { parseConfig } from "../../functions/config/config";
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import type { ClientPush, PushOutcome } from "../../functions/ports/client-push";
import type { FlowRunner } from "../../functions/ports/flow-runner";
import { StreamingRelay } from "../../functions/relay/relay";
import { serveRelayWorker, siblingsChannel } from "../../functions/relay/workers";
import { createDocumentClient } from "../../functions/store/dynamo-client";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoConnectionRegistry, DynamoPromptQueue } from "../../functions/store/dynamo-session-items";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { countDynamoRequests, type DynamoRequest } from "./dynamo-usage";

export interface BenchWorkerData {
  index: number;
  count: number;
  ownerId: string;
  maxSessions: number;
  endpoint: string;
  tableName: string;
  leaseTtlSeconds: number;
  /** The fake OpenCode's port (a warm-up request before the baseline). */
  agentPort: number;
}

/** A counted request, and whether it touched the relays' own items (heartbeats: PK "RELAYS") rather than a session's. */
export type CountedRequest = DynamoRequest & { own: boolean };

/** One measured run, as a worker saw it (`measureStop`). */
export interface Measured {
  latencies: number[];
  firstLatencies: number[];
  listMs: number[];
  gc: { major: number[]; minor: number[] };
}

export interface WorkerTotals {
  open: number;
  held: number;
  counters: Record<string, number>;
  streams: Record<string, number>;
  pacer: { granted: number; waited: number; highestLimit: number; lowestLimit: number; lowestDuty: number; spacedMs: number };
  connectionLists: number;
  frames: number;
  /** Text deltas timed since the last `measureStart`. */
  timed: number;
  logged: [string, number][];
  codes: [string, number][];
  sdkQueue: { warnings: number; maxEnqueued: number };
}

export type BenchRequest =
  | { cmd: "scanNow" | "renewNow" | "backstopNow" | "totals" | "open" | "pull" | "memory" | "warm" | "lagStart" | "lagStop" | "measureStop" }
  | { cmd: "measureStart"; offsetMs: number }
  | { cmd: "profileStart"; kind: "cpu" | "heap"; file: string }
  | { cmd: "profileStop" };

/** Event-loop delay sampling interval: each sample is the time between two ticks of a timer this often. */
export const LAG_RESOLUTION_MS = 10;

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

const clock = () => performance.timeOrigin + performance.now();

/** Hands frames to nobody, stamping text deltas' arrival against their emit time (child clock, corrected by `offsetMs`). */
class TimingPush implements ClientPush {
  /** Child clock minus this process's clock. */
  offsetMs = 0;
  measuring = false;
  frames = 0;
  latencies: number[] = [];
  /** The latency of each message's first text delta: the one a turn's first event comes 25 ms before. */
  firstLatencies: number[] = [];
  private readonly seen = new Set<string>();

  /** A new measured run: nothing timed yet (the load's message ids start again at 0). */
  reset(offsetMs: number): void {
    this.latencies = [];
    this.firstLatencies = [];
    this.seen.clear();
    this.offsetMs = offsetMs;
    this.measuring = true;
  }

  send(_connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    this.frames++;
    if (this.measuring && message.type === "message.part.text-delta") {
      const at = clock();
      const stamp = /t=([\d.]+);/.exec(String(message.delta));
      if (!stamp) return Promise.resolve("sent");
      const latency = at - (Number(stamp[1]) - this.offsetMs);
      this.latencies.push(latency);
      const messageId = String(message.messageId);
      if (!this.seen.has(messageId)) {
        this.seen.add(messageId);
        this.firstLatencies.push(latency);
      }
    }
    return Promise.resolve("sent");
  }

  disconnect(): Promise<PushOutcome> {
    return Promise.resolve("gone");
  }
}

/** Loop delay beyond the sampling interval, in ms. */
function lagMs(h: IntervalHistogram): { p50: number; p99: number; max: number } {
  // Histogram values are nanoseconds; an empty histogram reports huge sentinels.
  if (h.count === 0) return { p50: 0, p99: 0, max: 0 };
  const beyond = (ns: number) => Math.max(0, ns / 1e6 - LAG_RESOLUTION_MS);
  return { p50: beyond(h.percentile(50)), p99: beyond(h.percentile(99)), max: beyond(h.max) };
}

/** A forced full GC: `global.gc` under --expose-gc, else the V8 flag set at run time; null when neither works. */
export function findGc(): { gc: (() => void) | null; how: string } {
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

serveRelayWorker<BenchWorkerData>(async (data) => {
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
  const doc = createDocumentClient({ endpoint: data.endpoint });
  const { tableName } = data;
  const connections = new DynamoConnectionRegistry(doc, tableName);
  // Connection-list Queries the fan-out makes (issue 25: read once per session, then again only on a join nudge or every 30 s).
  let connectionLists = 0;
  /** How long each connection-list Query took while a run was measured. */
  let listMs: number[] = [];
  const listConnections = connections.list.bind(connections);
  connections.list = (sessionId) => {
    connectionLists++;
    const started = performance.now();
    return listConnections(sessionId).finally(() => {
      if (push.measuring) listMs.push(performance.now() - started);
    });
  };
  // Every DynamoDB request the relay sends, with its capacity units (dynalite's consumed capacity), and
  // whether it touched the relays' own items; handed to the bench (`pull`) and forgotten here.
  let own: boolean[] = [];
  let counted: DynamoRequest[] = [];
  countDynamoRequests(doc, (r) => counted.push(r));
  {
    const client = doc as unknown as { send: (command: { input: Record<string, unknown> }) => Promise<unknown> };
    const inner = client.send.bind(client);
    client.send = (command) => {
      const key = command.input.Key as { PK?: unknown } | undefined;
      const values = command.input.ExpressionAttributeValues as Record<string, unknown> | undefined;
      own.push(key?.PK === "RELAYS" || values?.[":pk"] === "RELAYS");
      return inner(command);
    };
  }
  const agent = new OpenCodeAgentClient();
  const siblings = data.count > 1 ? siblingsChannel(data.index, data.count, `relay-bench-siblings-${process.pid}`) : null;
  const relay = new StreamingRelay(
    {
      sessions: new DynamoSessionStore(doc, tableName),
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
      ...(siblings ? { siblings } : {}),
    },
    { ownerId: data.ownerId, leaseTtlSeconds: data.leaseTtlSeconds, scanIntervalMs: 600_000, maxSessions: data.maxSessions },
  );

  const { gc } = findGc();
  let lag: IntervalHistogram | null = null;
  const gcSeen = { major: [] as number[], minor: [] as number[] };
  let gcObserver: PerformanceObserver | null = null;
  let profile: { stop: () => Promise<void> } | null = null;

  const answer = async (body: BenchRequest): Promise<unknown> => {
    switch (body.cmd) {
      case "scanNow":
        return relay.scanNow();
      case "renewNow":
        return relay.renewNow();
      case "backstopNow":
        return relay.backstopNow();
      case "warm":
        // What the first claim would load lazily (fetch's HTTP client, the agent client's schemas), before the baseline.
        return agent.isBusy({ url: `http://127.0.0.1:${data.agentPort}/sb/0`, authorization: null }, "ses_bench0");
      case "open":
        // Polled while claims run (bench 5c's takeover): the count alone, not every total.
        return relay.streamCounters().open;
      case "totals": {
        const p = relay.pacer.stats;
        return {
          open: relay.streamCounters().open,
          held: relay.heldSessions().length,
          counters: { ...relay.counters },
          streams: relay.streamCounters(),
          pacer: { granted: p.granted, waited: p.waited, highestLimit: p.highestLimit, lowestLimit: p.lowestLimit, lowestDuty: p.lowestDuty, spacedMs: p.spacedMs },
          connectionLists,
          frames: push.frames,
          timed: push.latencies.length,
          logged: [...logger.counts.entries()],
          codes: [...logger.codes.entries()],
          sdkQueue: { ...sdkQueue },
        } satisfies WorkerTotals;
      }
      case "pull": {
        const out: CountedRequest[] = counted.map((r, i) => ({ ...r, own: own[i] ?? false }));
        counted = [];
        own = [];
        return out;
      }
      case "memory":
        if (gc) {
          gc();
          await sleep(50);
          gc();
        }
        return process.memoryUsage().heapUsed;
      case "lagStart":
        lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
        lag.enable();
        return null;
      case "lagStop": {
        const h = lag;
        lag = null;
        h?.disable();
        return h ? lagMs(h) : { p50: 0, p99: 0, max: 0 };
      }
      case "measureStart":
        push.reset(body.offsetMs);
        listMs = [];
        gcSeen.major = [];
        gcSeen.minor = [];
        gcObserver = new PerformanceObserver((list) => {
          for (const entry of list.getEntries()) {
            const kind = (entry as unknown as { detail?: NodeGCPerformanceDetail }).detail?.kind;
            (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR ? gcSeen.major : gcSeen.minor).push(entry.duration);
          }
        });
        gcObserver.observe({ entryTypes: ["gc"] });
        return null;
      case "measureStop":
        push.measuring = false;
        gcObserver?.disconnect();
        return { latencies: push.latencies, firstLatencies: push.firstLatencies, listMs, gc: gcSeen } satisfies Measured;
      case "profileStart":
        profile = await startProfile(body.kind, body.file);
        return null;
      case "profileStop":
        await profile?.stop();
        profile = null;
        return null;
    }
  };

  return {
    heldSessions: () => relay.heldSessions().length,
    drain: async () => {
      await relay.drain();
      siblings?.close();
      doc.destroy();
      console.warn = consoleWarn;
      return { ...relay.counters };
    },
    request: (body) => answer(body as BenchRequest),
  };
});

/** A CPU or sampled-heap profile of this worker's isolate, written to `file` on stop (open it in Chrome DevTools). */
async function startProfile(kind: "cpu" | "heap", file: string): Promise<{ stop: () => Promise<void> }> {
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
    },
  };
}
