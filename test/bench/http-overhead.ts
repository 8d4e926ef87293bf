/**
 * Section 3: control-plane HTTP overhead over the local runtime (node:http → API Gateway event →
 * middy handler → dynalite), and the DynamoDB requests each API call makes, with a cost estimate.
 * Import this module only after the environment is set (it loads the runtime).
 */
import { startLocalRuntime, type LocalRuntime } from "../../infra/local/runtime";
import { countDynamoRequests as countDocRequests, dynamoCostNotes, USD_PER_RRU, USD_PER_WRU } from "./dynamo-usage";
import { heading, mean, ms, note, percentile, table } from "./report";

const N = 300;
const N_LIST = 50;

class Counters {
  store = new Map<string, number>();
  dynamo = new Map<string, number>();
  rru = 0;
  wru = 0;
  reset(): void {
    this.store.clear();
    this.dynamo.clear();
    this.rru = 0;
    this.wru = 0;
  }
  bump(map: Map<string, number>, key: string): void {
    map.set(key, (map.get(key) ?? 0) + 1);
  }
}

/** Counts every method call on a store instance (the handlers call through `deps`, i.e. this instance). */
function countMethods(instance: object, label: string, counters: Counters): void {
  const target = instance as Record<string, unknown>;
  const names = new Set<string>();
  for (let proto = Object.getPrototypeOf(instance) as object | null; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
    for (const name of Object.getOwnPropertyNames(proto)) if (name !== "constructor" && typeof target[name] === "function") names.add(name);
  }
  for (const name of names) {
    const original = target[name] as (...args: unknown[]) => unknown;
    target[name] = function (this: unknown, ...args: unknown[]) {
      counters.bump(counters.store, `${label}.${name}`);
      return original.apply(this, args);
    };
  }
}

/**
 * Counts the DynamoDB requests themselves, on the document client the stores share (a private
 * field of the store: this is a benchmark probe, not an API). See dynamo-usage.ts for the units.
 */
function countDynamoRequests(runtime: LocalRuntime, counters: Counters): boolean {
  const doc = (runtime.deps.sessions as unknown as { doc?: unknown }).doc;
  return countDocRequests(doc, ({ op, rru, wru }) => {
    counters.bump(counters.dynamo, op);
    counters.rru += rru;
    counters.wru += wru;
  });
}

interface PhaseResult {
  name: string;
  n: number;
  latencies: number[];
  totalMs: number;
  unexpected: Map<string, number>;
  store: Map<string, number>;
  dynamo: Map<string, number>;
  rru: number;
  wru: number;
}

async function phase(
  name: string,
  n: number,
  expected: number,
  counters: Counters,
  request: (i: number) => Promise<Response>,
  onResponse?: (res: Response, i: number) => Promise<void>,
): Promise<PhaseResult> {
  counters.reset();
  const latencies: number[] = [];
  const unexpected = new Map<string, number>();
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const res = await request(i);
    if (onResponse && res.status === expected) await onResponse(res, i);
    else await res.arrayBuffer();
    latencies.push(performance.now() - t);
    if (res.status !== expected) unexpected.set(String(res.status), (unexpected.get(String(res.status)) ?? 0) + 1);
  }
  const totalMs = performance.now() - started;
  return { name, n, latencies, totalMs, unexpected, store: new Map(counters.store), dynamo: new Map(counters.dynamo), rru: counters.rru, wru: counters.wru };
}

function perRequest(map: Map<string, number>, n: number): string {
  if (map.size === 0) return "-";
  return [...map.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}×${+(v / n).toFixed(2)}`)
    .join(", ");
}

export async function benchHttpOverhead(): Promise<void> {
  heading(`3. Control-plane HTTP overhead (local runtime: node:http → API GW v2 event → middy → dynalite)`);
  const startedAt = performance.now();
  const runtime = await startLocalRuntime({ port: 0 });
  note(`local runtime started in ${(performance.now() - startedAt).toFixed(0)} ms at ${runtime.url}`);
  try {
    const counters = new Counters();
    countMethods(runtime.deps.sessions, "sessions", counters);
    countMethods(runtime.deps.tokens, "tokens", counters);
    const probed = countDynamoRequests(runtime, counters);
    if (!probed) note("! could not reach the stores' document client: DynamoDB request counts below are derived from store calls only");

    const auth = { authorization: `Bearer ${runtime.devApiToken}` };
    const ids: string[] = [];
    const url = (p: string) => `${runtime.url}${p}`;

    // Warm-up (JIT, connection pool, dynalite), not measured.
    for (let i = 0; i < 20; i++) await (await fetch(url("/v1/health"))).arrayBuffer();

    const phases: PhaseResult[] = [];
    phases.push(await phase("GET /v1/health (no auth, no DB)", N, 200, counters, () => fetch(url("/v1/health"))));
    phases.push(
      await phase(
        "POST /v1/sessions",
        N,
        201,
        counters,
        () => fetch(url("/v1/sessions"), { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ title: "bench" }) }),
        async (res) => {
          const body = (await res.json()) as { session?: { id?: string } };
          if (body.session?.id) ids.push(body.session.id);
        },
      ),
    );
    const idAt = (i: number) => ids[i % Math.max(1, ids.length)] ?? "missing";
    phases.push(await phase("GET /v1/sessions/{id}", N, 200, counters, (i) => fetch(url(`/v1/sessions/${idAt(i)}`), { headers: auth })));
    phases.push(await phase("POST /v1/sessions/{id}/heartbeat", N, 204, counters, (i) => fetch(url(`/v1/sessions/${idAt(i)}/heartbeat`), { method: "POST", headers: auth })));
    phases.push(await phase("GET /v1/sessions?limit=20", N_LIST, 200, counters, () => fetch(url("/v1/sessions?limit=20"), { headers: auth })));

    console.log("\n   a) Latency (sequential, one client, keep-alive; includes the in-process fetch client)");
    table(
      ["request", "n", "p50", "p99", "mean", "max", "req/s", "unexpected status"],
      phases.map((p) => [
        p.name,
        p.n,
        ms(percentile(p.latencies, 50)),
        ms(percentile(p.latencies, 99)),
        ms(mean(p.latencies)),
        ms(Math.max(...p.latencies)),
        `${((p.n / p.totalMs) * 1000).toFixed(0)}/s`,
        p.unexpected.size ? [...p.unexpected.entries()].map(([s, c]) => `${s}×${c}`).join(", ") : "none",
      ]),
    );

    console.log("\n   b) Store calls and DynamoDB requests per API request (measured by wrapping the runtime's store instances)");
    table(
      ["request", "store calls / request", "DynamoDB requests / request"],
      phases.map((p) => [p.name, perRequest(p.store, p.n), probed ? perRequest(p.dynamo, p.n) : "n/a"]),
    );

    console.log("\n   c) Estimated DynamoDB on-demand cost (capacity units per request from dynalite's ConsumedCapacity + GSI writes)");
    table(
      ["request", "RRU / req", "WRU / req", "$ per 1,000 req", "$ per 1M req"],
      phases.map((p) => {
        const rru = p.rru / p.n;
        const wru = p.wru / p.n;
        const per1k = 1000 * (rru * USD_PER_RRU + wru * USD_PER_WRU);
        return [p.name, rru.toFixed(2), wru.toFixed(2), `$${per1k.toFixed(6)}`, `$${(per1k * 1000).toFixed(3)}`];
      }),
    );
    for (const line of dynamoCostNotes()) note(line);
    note("Excludes API Gateway, Lambda, storage, PITR and data transfer. Local dynalite, not DynamoDB: latency is not AWS latency.");
  } finally {
    await runtime.close();
  }
}
