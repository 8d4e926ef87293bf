/**
 * The create-session route (`POST /v1/sessions`) over a store that records every write and a
 * prompt queue that records every enqueue (both must stay empty when a request is refused).
 */
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { Logger } from "@aws-lambda-powertools/logger";
import { parseConfig } from "../../functions/config/config";
import type { SessionRecord } from "../../functions/domain/session";
import { makeCreateSessionHandler } from "../../functions/http/handlers/create-session";
import type { HttpDeps } from "../../functions/http/http-handler";
import { createMetrics } from "../../functions/observability/metrics";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";
import { T0 } from "./builders";

export const HARNESS_SESSION_ID = "ses_0123456789abcdefghijklmnop";

export interface CreateSessionAnswer {
  status: number;
  /** The raw response body (to check nothing secret is echoed). */
  text: string;
  body: { session?: Record<string, unknown>; error?: { code: string; message: string } };
}

export function createSessionHarness() {
  const stored: SessionRecord[] = [];
  const enqueued: unknown[] = [];
  const deps = {
    sessions: { createSession: async (record: SessionRecord) => void stored.push(record), countOpenSessions: async () => stored.length },
    prompts: { enqueue: async (p: unknown) => void enqueued.push(p) },
    secrets: { existing: async () => new Set<string>() },
    orgSettings: { getFallbackModels: async () => [] },
    // No limits: the credit check passes (its own tests: test/flow/usage-metering.test.ts).
    usage: { getLimits: async () => ({ maxRunningSessions: null, monthlyActiveSeconds: null }) },
    tokens: { resolveToken: async () => ({ userId: "user-a", orgId: "org-a", role: "member" }), putToken: async () => undefined },
    config: parseConfig({ TABLE_NAME: "t" }),
    now: () => T0,
    newSessionId: () => HARNESS_SESSION_ID,
    logger: new Logger({ serviceName: "test", logLevel: "SILENT" }),
    metrics: createMetrics(),
  } as unknown as HttpDeps;
  const handler = makeCreateSessionHandler(deps);
  const postRaw = async (rawBody: string): Promise<CreateSessionAnswer> => {
    const event = {
      version: "2.0",
      routeKey: "POST /v1/sessions",
      rawPath: "/v1/sessions",
      rawQueryString: "",
      headers: { authorization: "Bearer sbx_0123456789abcdefghij", "content-type": "application/json" },
      requestContext: { requestId: "req-1", http: { method: "POST", path: "/v1/sessions" } },
      isBase64Encoded: false,
      body: rawBody,
    } as unknown as APIGatewayProxyEventV2;
    const res = await handler(event, buildLambdaContext("CreateSession", "req-1"));
    return { status: res.statusCode ?? 0, text: res.body ?? "", body: JSON.parse(res.body ?? "null") as CreateSessionAnswer["body"] };
  };
  return { post: (body: unknown) => postRaw(JSON.stringify(body)), postRaw, stored, enqueued };
}
