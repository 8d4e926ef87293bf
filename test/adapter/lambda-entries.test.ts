/**
 * The Lambda entries as AWS invokes them (handler module, event, Lambda context) over dynalite:
 * every entry of a container shares one runtime from the composition root (one DynamoDB client,
 * the WebSocket entry included), each wears the Powertools middlewares (every log line carries
 * the Lambda context; its metrics are flushed), and request metrics are one name with dimensions.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Context } from "aws-lambda";
import { buildHttpApiEvent, buildLambdaContext } from "../../infra/local/api-gateway-events";
import { DynamoConnectionRegistry } from "../../functions/store/dynamo-session-items";
import { createDocumentClient } from "../../functions/store/dynamo-client";
import { startTestTable, type TestTable } from "../support/dynalite";

vi.mock("../../functions/store/dynamo-client", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../functions/store/dynamo-client")>();
  return { ...original, createDocumentClient: vi.fn(original.createDocumentClient) };
});

let table: TestTable;
let clientsBefore = 0;
const written: string[] = [];

beforeAll(async () => {
  table = await startTestTable();
  clientsBefore = vi.mocked(createDocumentClient).mock.calls.length;
  vi.stubEnv("TABLE_NAME", table.tableName);
  vi.stubEnv("DYNAMODB_ENDPOINT", table.endpoint);
  vi.stubEnv("POWERTOOLS_SERVICE_NAME", "entries-test");
  vi.stubEnv("POWERTOOLS_METRICS_NAMESPACE", "EntriesTest");
  vi.stubEnv("POWERTOOLS_METRICS_DISABLED", "false");
  vi.stubEnv("POWERTOOLS_DEV", "");
  vi.stubEnv("POWERTOOLS_LOG_LEVEL", "INFO");
  vi.stubEnv("SANDBOX_ACCESS_KEY", "entries-test-master-key-0123456789abcdef");
  const write = process.stdout.write.bind(process.stdout);
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
    written.push(String(chunk));
    return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
  });
});

afterAll(async () => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  await table.close();
});

function context(functionName: string, requestId: string): Context {
  return { ...buildLambdaContext(functionName, requestId), invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}` };
}

/** The JSON lines written to stdout since `from` (log lines and EMF documents). */
function linesSince(from: number): Record<string, unknown>[] {
  return written
    .slice(from)
    .flatMap((chunk) => chunk.split("\n"))
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The EMF documents among `lines` that publish `metric`. */
function emf(lines: Record<string, unknown>[], metric: string): Record<string, unknown>[] {
  return lines.filter((line) => {
    const aws = line._aws as { CloudWatchMetrics?: { Metrics: { Name: string }[] }[] } | undefined;
    return aws?.CloudWatchMetrics?.some((m) => m.Metrics.some((x) => x.Name === metric)) ?? false;
  });
}

describe("Lambda entries (composition root + Powertools middlewares)", () => {
  it("an HTTP route logs with the Lambda context and publishes HttpRequests with Route and Status dimensions", async () => {
    const { handler } = await import("../../functions/http/handlers/health");
    const from = written.length;
    const event = buildHttpApiEvent({ method: "GET", url: "/v1/health", headers: {}, body: Buffer.alloc(0), sourceIp: "127.0.0.1" }, "GET /v1/health", undefined);
    const res = await handler(event, context("HealthFn", "req-http-1"));
    expect(res.statusCode).toBe(200);
    const lines = linesSince(from);
    const completed = lines.find((l) => l.message === "request completed");
    expect(completed).toMatchObject({ function_request_id: "req-http-1", function_name: "HealthFn", route: "Health", service: "entries-test" });
    const [doc] = emf(lines, "HttpRequests");
    expect(doc).toMatchObject({ Route: "Health", Status: "200", HttpRequests: 1 });
    // One metric name for every route: no per-route, per-status metric names any more.
    expect(lines.some((l) => Object.keys(l).some((k) => /^Health\.\d+$/.test(k)))).toBe(false);
    expect((doc?._aws as { CloudWatchMetrics: { Namespace: string }[] }).CloudWatchMetrics[0]?.Namespace).toBe("EntriesTest");
  });

  it("a WebSocket route logs with the Lambda context and publishes WebSocketRequests by Route and Status", async () => {
    const connections = new DynamoConnectionRegistry(table.doc, table.tableName);
    const base = { sessionId: "ses_0123456789abcdefghij", userId: "u", clientType: "web" as const, connectedAt: new Date().toISOString(), ready: true };
    await connections.add({ ...base, connectionId: "conn-a" });
    await connections.add({ ...base, connectionId: "conn-b" });
    const { handler } = await import("../../functions/ws/handlers/disconnect");
    const from = written.length;
    const res = await handler({ requestContext: { connectionId: "conn-a", routeKey: "$disconnect", eventType: "DISCONNECT" } }, context("WsDisconnectFn", "req-ws-1"));
    expect(res.statusCode).toBe(200);
    const lines = linesSince(from);
    const disconnected = lines.find((l) => l.message === "client disconnected");
    expect(disconnected).toMatchObject({ function_request_id: "req-ws-1", function_name: "WsDisconnectFn" });
    // The runtime's logger is shared: the HTTP invocation's keys were reset after it.
    expect(disconnected).not.toHaveProperty("route");
    expect(emf(lines, "WebSocketRequests")[0]).toMatchObject({ Route: "$disconnect", Status: "200", WebSocketRequests: 1 });
    expect(await connections.lookup("conn-a")).toBeNull();
  });

  it("a schedule target (step entry) logs with the Lambda context, publishes StepInvocations, failures included", async () => {
    const { handler } = await import("../../functions/schedules/schedule-fired");
    const from = written.length;
    const result = await handler({ sessionId: "ses_unknownunknownunkn", purpose: "expiry", at: new Date().toISOString() }, context("ScheduleFiredFn", "req-step-1"));
    expect(result).toEqual({ started: null });
    const lines = linesSince(from);
    expect(lines.find((l) => l.message === "schedule fired for a deleted session")).toMatchObject({ function_request_id: "req-step-1", function_name: "ScheduleFiredFn" });
    expect(emf(lines, "StepInvocations")[0]).toMatchObject({ Function: "ScheduleFiredFn", Outcome: "ok", StepInvocations: 1 });

    // A failed invocation is counted too, and the next one does not inherit the last one's context.
    await expect(handler({ purpose: "nonsense" }, context("ScheduleFiredFn", "req-step-2"))).rejects.toThrow();
    expect(emf(linesSince(from), "StepInvocations").at(-1)).toMatchObject({ Function: "ScheduleFiredFn", Outcome: "error" });
  });

  it("every entry of the container shares one runtime: one DynamoDB client, the WebSocket entry included", () => {
    expect(vi.mocked(createDocumentClient).mock.calls.length - clientsBefore).toBe(1);
  });
});
