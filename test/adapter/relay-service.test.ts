/**
 * The Fargate relay service (functions/relay/service.ts) against dynalite, its relays in worker
 * threads running the image's entry (functions/relay/main.ts): it starts from the environment,
 * one heartbeat per worker, claims running sessions within each worker's share of
 * RELAY_MAX_SESSIONS, reports them on the health endpoint, and on shutdown retires every worker's
 * heartbeat so a successor claims at once.
 */
import { hostname } from "node:os";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../functions/observability/logger";
import { startRelayService, type RelayService } from "../../functions/relay/service";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";
import { waitFor } from "../support/wait-for";

const workerScript = new URL("../../functions/relay/main.ts", import.meta.url);
/** Without ECS task metadata the owner id is host and pid (resolveOwnerId); each worker adds its index. */
const workerOwners = [`${hostname()}-${process.pid}-w0`, `${hostname()}-${process.pid}-w1`];

// A table per test: the workers' owner ids are the same in both tests.
let table: TestTable;
let service: RelayService | null = null;

beforeEach(async () => {
  table = await startTestTable();
});
afterEach(async () => {
  await service?.shutdown().catch(() => undefined);
  service = null;
  await table.close();
});

function env(over: Record<string, string> = {}): Record<string, string> {
  return {
    TABLE_NAME: table.tableName,
    DYNAMODB_ENDPOINT: table.endpoint,
    // The relay derives each session's agent password from the sandbox keys (AWS: the secret's ARN).
    SANDBOX_ACCESS_KEY: "relay-service-test-master-key-0123456789",
    RELAY_HEALTH_PORT: "0",
    RELAY_SCAN_INTERVAL_SECONDS: "0.05",
    RELAY_PUBLISH_METRICS: "false",
    RELAY_WORKERS: "2",
    ...over,
  };
}

async function health(port: number): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${port}/health`);
  return { status: res.status, body: await res.json() };
}

/** Health until it reports `held` sessions (each worker reports every HELD_REPORT_MS). */
function healthHolding(port: number, held: number) {
  return waitFor(() => health(port), {
    until: (h) => (h.body as { heldSessions?: number }).heldSessions === held,
    timeoutMs: 15_000,
    message: `health to report ${held} held sessions`,
  });
}

/** A running session on a runtime nobody listens on: a relay holds it and keeps reconnecting. */
async function runningSession(sessions: DynamoSessionStore, n: number) {
  const s = buildSession({ status: "running", sandboxId: `sb-${n}`, openCodeUrl: "http://127.0.0.1:9", codingAgentSessionId: `ses_agent_${n}` });
  await sessions.createSession(s);
  return s;
}

describe("relay service", () => {
  it("serves health with the held sessions, one heartbeat per worker, and releases everything on shutdown", async () => {
    const sessions = new DynamoSessionStore(table.doc, table.tableName);
    const leases = new DynamoRelayLeaseStore(table.doc, table.tableName);
    const s = await runningSession(sessions, 1);
    const started = await startRelayService(env(), createLogger("relay-service-test"), { workerScript });
    service = started;
    expect(await healthHolding(started.healthPort, 1)).toEqual({ status: 200, body: { ok: true, heldSessions: 1 } });

    // Each worker is a relay of its own: its own heartbeat item, and the claim names one of them.
    const live = await leases.liveRelays(new Date());
    expect([...live.keys()].sort()).toEqual(workerOwners);
    const claim = await leases.view(s.id);
    expect(workerOwners).toContain(claim?.relayOwner);
    expect(claim?.relayEpoch).toBe(live.get(claim?.relayOwner ?? ""));

    const counters = await started.shutdown();
    service = null;
    // Both workers drained, each retiring its heartbeat (one release each); the one holding the session claimed it.
    expect(counters).toMatchObject({ releases: 2, claims: 1 });
    expect(started.workers.heldSessions()).toBe(0);
    const after = await leases.liveRelays(new Date());
    for (const owner of workerOwners) expect(after.has(owner), owner).toBe(false);
    await expect(health(started.healthPort)).rejects.toThrow();
    // Retired on drain: a successor claims at once, without waiting for the TTL.
    const seen = await leases.view(s.id);
    if (!seen) throw new Error("session gone");
    expect(await leases.claim(seen, await leases.register("successor", new Date(), 30), new Date())).not.toBeNull();
  });

  it("splits RELAY_MAX_SESSIONS over the workers: each holds its share even when its claims run together, a third session waits", async () => {
    const sessions = new DynamoSessionStore(table.doc, table.tableName);
    const leases = new DynamoRelayLeaseStore(table.doc, table.tableName);
    // 2 over 2 workers: 1 each.
    const started = await startRelayService(env({ RELAY_MAX_SESSIONS: "2" }), createLogger("relay-service-test"), { workerScript });
    service = started;
    // Three running sessions before the workers start: each worker's first scan sees all three and
    // runs its claims side by side, so the cap must hold against claims already in flight.
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await runningSession(sessions, n)).id);
    await healthHolding(started.healthPort, 2);
    expect(started.workers.held()).toEqual([1, 1]);
    // Nothing announces a claim that does not happen: give both workers 20 scans (every 50 ms).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const owners = await Promise.all(ids.map(async (id) => (await leases.view(id))?.relayOwner ?? null));
    // Which two is the scans' (random) order; one held by each worker, the third by nobody.
    expect(owners.filter((o) => o !== null).sort()).toEqual(workerOwners);
    expect(owners.filter((o) => o === null)).toHaveLength(1);
    expect(await health(started.healthPort)).toEqual({ status: 200, body: { ok: true, heldSessions: 2 } });
  });
});
