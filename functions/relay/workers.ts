/**
 * Relay workers (issue 15): one relay process runs several relays, each in its own worker thread
 * with its own owner id, heartbeat item, scan, nudge consumer and share of `RELAY_MAX_SESSIONS`.
 *
 * Why threads: at 10,000 streams in one V8 heap, the fan-out tail was the collector's and the
 * claims' (bench 5: scavenges of ~4.4 ms every ~0.2 s whose cost grows with the streams held, a
 * major GC marking ~300 MB, 500 claims of ~7.6 ms CPU each queued on the same event loop as every
 * delta). A worker holds a quarter of that: a quarter of the heap to mark, and its loop is
 * preempted by the kernel rather than waiting behind another worker's claims.
 *
 * Nothing here is new lifecycle logic: every worker runs the same `StreamingRelay`, and to the
 * table and the other relays each is simply one more relay. Takeover, nudges (the queue is shared:
 * any relay may receive a nudge and claims if it can) and drain work as they do between tasks.
 *
 * The supervisor (main thread) owns what is per process: the health endpoint and the HeldStreams
 * gauge (sums of what the workers report), and SIGTERM (every worker drains). A worker that dies
 * is started again after a pause with the same owner id: its registration is a new heartbeat epoch,
 * so the sessions its old epoch held are claimable at once (functions/store/dynamo-relay-store.ts).
 */
import { BroadcastChannel, isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";
import type { RelaySiblings } from "../ports/relay";

/** What a worker's relay offers its supervisor. */
export interface ServedRelay {
  /** Sessions it holds now. */
  heldSessions(): number;
  /** Streams closed, heartbeat retired, clients released; resolves with counters to log. */
  drain(): Promise<Record<string, number>>;
  /** Anything else the supervisor may ask (the bench drives its relays this way); the answer must be cloneable. */
  request?(body: unknown): Promise<unknown>;
}

type ToWorker = { type: "drain" } | { type: "request"; id: number; body: unknown };
type FromWorker =
  | { type: "started" }
  | { type: "held"; count: number }
  | { type: "reply"; id: number; body?: unknown; error?: string }
  | { type: "drained"; counters: Record<string, number> }
  | { type: "failed"; error: string };

/** How often a worker reports its held sessions (the health endpoint and the gauge read the last report). */
export const HELD_REPORT_MS = 1_000;

/**
 * In a worker thread: starts the relay from `workerData` and serves the supervisor. Returns false
 * (and does nothing) on the main thread, so one module can be both the entry and the worker.
 */
export function serveRelayWorker<D>(start: (data: D) => Promise<ServedRelay>): boolean {
  if (isMainThread || !parentPort) return false;
  const port = parentPort;
  const post = (message: FromWorker) => port.postMessage(message);
  let relay: ServedRelay | null = null;
  let draining = false;
  const starting = start(workerData as D);
  const report = setInterval(() => relay && post({ type: "held", count: relay.heldSessions() }), HELD_REPORT_MS);
  report.unref();
  port.on("message", (message: ToWorker) => {
    if (message.type === "drain") {
      if (draining) return;
      draining = true;
      clearInterval(report);
      // A drain that arrives while the relay still starts (a restart) waits for it: a relay started
      // after the drain would hold sessions and a heartbeat until the drain timeout terminates it.
      void starting.then((started) => started.drain()).then(
        (counters) => {
          post({ type: "drained", counters });
          port.close();
        },
        (err: unknown) => {
          post({ type: "failed", error: err instanceof Error ? err.message : String(err) });
          port.close();
        },
      );
      return;
    }
    const ask = relay?.request;
    void (ask ? ask.call(relay, message.body) : Promise.reject(new Error("this relay answers no requests"))).then(
      (body) => post({ type: "reply", id: message.id, body }),
      (err: unknown) => post({ type: "reply", id: message.id, error: err instanceof Error ? err.message : String(err) }),
    );
  });
  starting.then(
    (started) => {
      relay = started;
      post({ type: "started" });
      post({ type: "held", count: started.heldSessions() });
    },
    (err: unknown) => {
      post({ type: "failed", error: err instanceof Error ? err.message : String(err) });
      process.exit(1);
    },
  );
  return true;
}

export interface RelayWorkersOptions<D> {
  count: number;
  /** The module that calls `serveRelayWorker` in a worker thread (in the image: the relay bundle itself). */
  script: URL;
  /** Worker `index`'s start data (cloneable): the same for a restart, so it keeps its owner id. */
  data: (index: number) => D;
  logger: Logger;
  /** Pause before a worker that died is started again. */
  restartDelayMs?: number;
  /** How long a worker may take to drain before it is terminated (ECS allows 120 s in all). */
  drainTimeoutMs?: number;
}

interface Slot {
  index: number;
  worker: Worker | null;
  held: number;
  started: boolean;
  restarts: number;
  exited: Promise<void>;
}

/** The main thread's side: starts the workers, restarts one that dies, sums their reports, drains them. */
export class RelayWorkers<D> {
  private readonly slots: Slot[];
  private draining = false;
  private nextId = 1;
  private readonly pending = new Map<number, { worker: number; resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly drained = new Map<number, Record<string, number>>();

  constructor(private readonly options: RelayWorkersOptions<D>) {
    if (!Number.isInteger(options.count) || options.count < 1) throw new Error(`relay workers: count must be a positive integer (got ${options.count})`);
    this.slots = Array.from({ length: options.count }, (_, index) => ({ index, worker: null, held: 0, started: false, restarts: 0, exited: Promise.resolve() }));
  }

  /** Starts every worker; resolves once each has started its relay, rejects (and stops the others) if one fails to. */
  async start(): Promise<void> {
    try {
      await Promise.all(this.slots.map((slot) => this.spawn(slot)));
    } catch (err) {
      this.draining = true;
      await Promise.all(this.slots.map((s) => s.worker?.terminate()));
      throw err;
    }
  }

  /** Sessions held by all workers, as last reported (every HELD_REPORT_MS). */
  heldSessions(): number {
    return this.slots.reduce((sum, s) => sum + s.held, 0);
  }

  /** Per worker: its last report. */
  held(): number[] {
    return this.slots.map((s) => s.held);
  }

  /** Asks every running worker; answers in worker order. */
  request<T>(body: unknown): Promise<T[]> {
    return Promise.all(this.slots.map((slot) => this.requestOne<T>(slot.index, body)));
  }

  /** Asks worker `index` alone. */
  requestOne<T>(index: number, body: unknown): Promise<T> {
    const slot = this.slots[index];
    const worker = slot?.worker;
    if (!slot || !worker || !slot.started) return Promise.reject(new Error(`relay worker ${index} is not running`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { worker: slot.index, resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ type: "request", id, body } satisfies ToWorker);
    });
  }

  /** Every worker drains (no restart from now on); resolves with their counters summed once all have exited. */
  async drain(): Promise<Record<string, number>> {
    this.draining = true;
    const timeoutMs = this.options.drainTimeoutMs ?? 100_000;
    await Promise.all(
      this.slots.map(async (slot) => {
        const worker = slot.worker;
        if (!worker) return;
        worker.postMessage({ type: "drain" } satisfies ToWorker);
        const timer = setTimeout(() => {
          this.options.logger.error("relay worker did not drain in time: terminated", { worker: slot.index, timeoutMs });
          void worker.terminate();
        }, timeoutMs);
        await slot.exited;
        clearTimeout(timer);
      }),
    );
    const sum: Record<string, number> = {};
    for (const counters of this.drained.values()) for (const [k, v] of Object.entries(counters)) sum[k] = (sum[k] ?? 0) + v;
    return sum;
  }

  private spawn(slot: Slot): Promise<void> {
    const worker = startWorker(this.options.script, this.options.data(slot.index));
    slot.worker = worker;
    slot.started = false;
    let startedResolve: () => void = () => undefined;
    let startedReject: (e: Error) => void = () => undefined;
    const started = new Promise<void>((resolve, reject) => {
      startedResolve = resolve;
      startedReject = reject;
    });
    worker.on("message", (message: FromWorker) => {
      switch (message.type) {
        case "started":
          slot.started = true;
          startedResolve();
          break;
        case "held":
          slot.held = message.count;
          break;
        case "reply": {
          const waiting = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (message.error !== undefined) waiting?.reject(new Error(message.error));
          else waiting?.resolve(message.body);
          break;
        }
        case "drained":
          this.drained.set(slot.index, message.counters);
          slot.held = 0;
          break;
        case "failed":
          this.options.logger.error("relay worker failed", { worker: slot.index, error: message.error });
          startedReject(new Error(`relay worker ${slot.index}: ${message.error}`));
          break;
      }
    });
    worker.on("error", (err) => {
      this.options.logger.error("relay worker error", { worker: slot.index, error: errorForLog(err) });
      startedReject(err);
    });
    slot.exited = new Promise<void>((resolve) =>
      worker.once("exit", (code) => {
        slot.worker = null;
        slot.started = false;
        for (const [id, waiting] of this.pending) {
          if (waiting.worker !== slot.index) continue;
          this.pending.delete(id);
          waiting.reject(new Error(`relay worker ${slot.index} exited (${code})`));
        }
        resolve();
        startedReject(new Error(`relay worker ${slot.index} exited (${code}) before it started`));
        if (this.draining) return;
        // Died on its own: its sessions' streams went with it. Start it again (same owner id, new epoch).
        slot.held = 0;
        slot.restarts++;
        this.options.logger.error("relay worker exited: restarting", { worker: slot.index, code, restarts: slot.restarts });
        const timer = setTimeout(() => {
          if (!this.draining) this.spawn(slot).catch((err: unknown) => this.options.logger.error("relay worker restart failed", { worker: slot.index, error: errorForLog(err) }));
        }, this.options.restartDelayMs ?? 1_000);
        timer.unref();
      }),
    );
    return started;
  }
}

/**
 * A worker running `script`. Under tsx (tests, the bench, `npm start`) the script is TypeScript:
 * the worker registers tsx's loader first, as the parent was started with it.
 */
function startWorker(script: URL, data: unknown): Worker {
  if (script.pathname.endsWith(".ts")) {
    return new Worker(`import { register } from "tsx/esm/api"; register(); await import(${JSON.stringify(script.href)});`, { eval: true, workerData: data });
  }
  return new Worker(script, { workerData: data });
}

type SiblingMessage = { type: "holds" | "dropped"; sessionId: string; from: number } | { type: "reset"; from: number };

/** A session's share among `count` relays: FNV-1a of its id, modulo `count`. */
export function shareOf(sessionId: string, count: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < sessionId.length; i++) {
    hash ^= sessionId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % count;
}

/**
 * Relay `index` of `count` in this process, told by its siblings over a `BroadcastChannel` (every
 * worker thread of the process that opens `name`) which sessions they hold. On open it tells them
 * to forget what an earlier run of this index said (a worker restarted after a crash held nothing).
 */
export function siblingsChannel(index: number, count: number, name = "relay-siblings"): RelaySiblings & { close(): void } {
  const channel = new BroadcastChannel(name);
  // Session id → the sibling that holds it.
  const elsewhere = new Map<string, number>();
  channel.onmessage = (event) => {
    const message = (event as { data: SiblingMessage }).data;
    if (message.from === index) return;
    if (message.type === "holds") elsewhere.set(message.sessionId, message.from);
    else if (message.type === "dropped") {
      if (elsewhere.get(message.sessionId) === message.from) elsewhere.delete(message.sessionId);
    } else for (const [id, from] of elsewhere) if (from === message.from) elsewhere.delete(id);
  };
  channel.unref();
  const post = (message: SiblingMessage) => channel.postMessage(message);
  post({ type: "reset", from: index });
  return {
    mine: (sessionId) => shareOf(sessionId, count) === index,
    heldElsewhere: (sessionId) => elsewhere.has(sessionId),
    holds: (sessionId) => post({ type: "holds", sessionId, from: index }),
    dropped: (sessionId) => post({ type: "dropped", sessionId, from: index }),
    close: () => channel.close(),
  };
}
