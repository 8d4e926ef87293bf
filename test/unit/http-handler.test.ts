import { describe, expect, it } from "vitest";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { redactingReplacer } from "../../functions/observability/logger";
import { parseConfig } from "../../functions/config/config";
import { ValidationError } from "../../functions/domain/errors";
import { httpRoute, type HttpDeps } from "../../functions/http/http-handler";
import { createMetrics } from "../../functions/observability/metrics";
import { capturingLogger } from "../support/capturing-logger";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";

const SECRET = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";


function deps(overrides: Partial<HttpDeps> = {}): HttpDeps {
  return {
    sessions: {} as HttpDeps["sessions"],
    prompts: {} as HttpDeps["prompts"],
    events: {} as HttpDeps["events"],
    transcript: {} as HttpDeps["transcript"],
    relayLeases: {} as HttpDeps["relayLeases"],
    proxies: {} as HttpDeps["proxies"],
    scheduler: {} as HttpDeps["scheduler"],
    flows: {} as HttpDeps["flows"],
    agent: {} as HttpDeps["agent"],
    provider: () => Promise.reject(new Error("no provider in this test")),
    sandboxKeys: { sandboxKey: () => Promise.reject(new Error("no keys in this test")), currentEpoch: () => Promise.resolve(0) },
    secrets: {} as HttpDeps["secrets"],
    orgSettings: {} as HttpDeps["orgSettings"],
    sessionSettings: {} as HttpDeps["sessionSettings"],
    connections: {} as HttpDeps["connections"],
    push: {} as HttpDeps["push"],
    catalog: {} as HttpDeps["catalog"],
    builds: {} as HttpDeps["builds"],
    usage: {} as HttpDeps["usage"],
    wsTickets: {} as HttpDeps["wsTickets"],
    tokens: { resolveToken: async () => ({ userId: "u", orgId: "o", role: "member" }), putToken: async () => undefined },
    config: parseConfig({ TABLE_NAME: "t" }),
    now: () => new Date(),
    newSessionId: () => "ses_x",
    logger: capturingLogger().logger,
    metrics: createMetrics(),
    ...overrides,
  };
}

function event(overrides: Partial<APIGatewayProxyEventV2> = {}): APIGatewayProxyEventV2 {
  return {
    version: "2.0",
    routeKey: "GET /x",
    rawPath: "/x",
    rawQueryString: "",
    headers: { authorization: "Bearer sbx_0123456789abcdefghij" },
    requestContext: { requestId: "req-123", http: { method: "GET", path: "/x" } } as APIGatewayProxyEventV2["requestContext"],
    isBase64Encoded: false,
    ...overrides,
  };
}

describe("httpRoute error mapping", () => {
  it("an unexpected error is a generic 500 with the request id; details only in the (redacted) log", async () => {
    const { logger, lines } = capturingLogger();
    const handler = httpRoute({ name: "Boom", auth: true }, async () => {
      throw new Error(`upstream said: invalid x-api-key ${SECRET}`);
    })(deps({ logger }));
    const res = await handler(event(), buildLambdaContext("Boom", "req-123"));
    expect(res.statusCode).toBe(500);
    expect(JSON.parse(res.body ?? "")).toEqual({ error: { code: "internal_error", message: "internal error; request id req-123" } });
    const log = lines.join("\n");
    expect(log).toContain("request failed");
    expect(log).toContain("upstream said");
    expect(log).not.toContain(SECRET);
  });

  it("a client error keeps its status, code and message", async () => {
    const handler = httpRoute({ name: "Bad", auth: false }, async () => {
      throw new ValidationError("body.name: too long");
    })(deps());
    const res = await handler(event(), buildLambdaContext("Bad", "req-1"));
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body ?? "")).toEqual({ error: { code: "invalid_request", message: "body.name: too long" } });
  });

  it("a token-store outage is a 500, not a 401, and the token is not logged", async () => {
    const { logger, lines } = capturingLogger();
    const handler = httpRoute({ name: "Auth", auth: true }, async () => ({ status: 200 }))(
      deps({
        logger,
        tokens: {
          resolveToken: async (t) => {
            throw new Error(`dynamo down while resolving ${t}`);
          },
          putToken: async () => undefined,
        },
      }),
    );
    const res = await handler(event({ headers: { authorization: "Bearer sbx_secret_token_value_123456" } }), buildLambdaContext("Auth", "r"));
    expect(res.statusCode).toBe(500);
    expect(lines.join("\n")).not.toContain("sbx_secret_token_value_123456");
  });

  it("base64-encoded bodies are decoded and measured in bytes", async () => {
    const seen: unknown[] = [];
    const { z } = await import("zod");
    const handler = httpRoute({ name: "Echo", auth: false, body: z.object({ a: z.string() }).strict() }, async ({ body }) => {
      seen.push(body);
      return { status: 204 };
    })(deps({ config: parseConfig({ TABLE_NAME: "t", MAX_BODY_BYTES: "20" }) }));
    const ok = await handler(event({ body: Buffer.from('{"a":"b"}').toString("base64"), isBase64Encoded: true }), buildLambdaContext("Echo", "r"));
    expect(ok.statusCode).toBe(204);
    expect(seen).toEqual([{ a: "b" }]);
    const big = await handler(event({ body: JSON.stringify({ a: "é".repeat(10) }) }), buildLambdaContext("Echo", "r"));
    expect(big.statusCode).toBe(413);
  });
});

describe("redactingReplacer", () => {
  it("masks secret-named keys and secret-shaped strings, leaves the rest", () => {
    const line = JSON.stringify({ apiKey: "abc123456", nested: { authorization: "Bearer x" }, note: `key ${SECRET}`, sessionId: "ses_abc", count: 3 }, redactingReplacer);
    expect(line).not.toContain("abc123456");
    expect(line).not.toContain(SECRET);
    expect(line).toContain("ses_abc");
    expect(line).toContain('"count":3');
  });
});

describe("parseConfig", () => {
  it("fails naming the variable", () => {
    expect(() => parseConfig({})).toThrow(/TABLE_NAME/);
    expect(() => parseConfig({ TABLE_NAME: "t", IDLE_SNAPSHOT_DELAY_SECONDS: "soon" })).toThrow(/IDLE_SNAPSHOT_DELAY_SECONDS/);
    expect(() => parseConfig({ TABLE_NAME: "t", SANDBOX_PROVIDERS: "local,lambda" })).toThrow(/SANDBOX_PROVIDERS.*lambda/);
    expect(() => parseConfig({ TABLE_NAME: "t", DEFAULT_SANDBOX_PROVIDER: "modal", SANDBOX_PROVIDERS: "e2b" })).toThrow(/DEFAULT_SANDBOX_PROVIDER/);
  });

  it("applies the seeds' defaults and accepts fractional seconds", () => {
    const c = parseConfig({ TABLE_NAME: "t", AUTOMATION_IDLE_GRACE_SECONDS: "0.5" });
    expect(c).toMatchObject({
      IDLE_SNAPSHOT_DELAY_SECONDS: 300,
      AUTOMATION_IDLE_GRACE_SECONDS: 0.5,
      SANDBOX_TIMEOUT_SECONDS: 3600,
      EXPIRY_MIGRATION_LEAD_SECONDS: 300,
      SWEEPER_INTERVAL_SECONDS: 600,
      LEASE_TTL_SECONDS: 300,
      DEFAULT_SANDBOX_PROVIDER: "local",
      SANDBOX_PROVIDERS: ["local"],
    });
  });
});
