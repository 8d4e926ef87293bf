/**
 * The Fargate relay service (functions/relay/service.ts) against dynalite: it starts from the
 * environment, claims a running session, reports it on the health endpoint, and on shutdown
 * leaves the session's relay lease free for a successor.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../functions/observability/logger";
import { startRelayService, type RelayService } from "../../functions/relay/service";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";
import { waitFor } from "../support/wait-for";

let table: TestTable;
let service: RelayService | null = null;

beforeAll(async () => {
  table = await startTestTable();
});
afterAll(async () => {
  await service?.shutdown().catch(() => undefined);
  await table.close();
});

async function health(port: number): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${port}/health`);
  return { status: res.status, body: await res.json() };
}

describe("relay service", () => {
  it("serves health with the held sessions, and releases them on shutdown", async () => {
    const sessions = new DynamoSessionStore(table.doc, table.tableName);
    // A runtime nobody listens on: the relay holds the session and keeps reconnecting.
    const s = buildSession({ status: "running", sandboxId: "sb-1", openCodeUrl: "http://127.0.0.1:9", codingAgentSessionId: "ses_agent" });
    await sessions.createSession(s);
    const started = await startRelayService(
      {
        TABLE_NAME: table.tableName,
        DYNAMODB_ENDPOINT: table.endpoint,
        // The relay derives each session's agent password from the sandbox keys (AWS: the secret's ARN).
        SANDBOX_ACCESS_KEY: "relay-service-test-master-key-0123456789",
        RELAY_HEALTH_PORT: "0",
        RELAY_SCAN_INTERVAL_SECONDS: "0.05",
        RELAY_PUBLISH_METRICS: "false",
      },
      createLogger("relay-service-test"),
    );
    service = started;
    await waitFor(() => started.relay.heldSessions().length > 0, { message: "the relay to hold the session" });
    expect(await health(started.healthPort)).toEqual({ status: 200, body: { ok: true, heldSessions: 1 } });

    await started.shutdown();
    service = null;
    expect(started.relay.heldSessions()).toEqual([]);
    // Retired on drain: a successor claims at once, without waiting for the TTL.
    const store = new DynamoRelayLeaseStore(table.doc, table.tableName);
    const seen = await store.view(s.id);
    if (!seen) throw new Error("session gone");
    expect(await store.claim(seen, await store.register("successor", new Date(), 30), new Date())).not.toBeNull();
  });
});
