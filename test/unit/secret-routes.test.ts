/**
 * The /v1/secrets handlers at the HTTP edge, with a captured log: the value of a secret is in no
 * response and no log line, on success, on a rejected request or on a server error, and it is
 * never handed to the store for a member.
 */
import { describe, expect, it } from "vitest";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { parseConfig } from "../../functions/config/config";
import type { Principal } from "../../functions/domain/principal";
import type { HttpDeps } from "../../functions/http/http-handler";
import { makePutSecretHandler } from "../../functions/http/handlers/put-secret";
import { makeDeleteSecretHandler } from "../../functions/http/handlers/delete-secret";
import { createMetrics } from "../../functions/observability/metrics";
import { capturingLogger } from "../support/capturing-logger";
import type { OrgSecretStore } from "../../functions/ports/org-secrets";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";

/** Not secret-shaped on purpose: the redactor would not hide it, so it must never be there at all. */
const VALUE = "correct horse battery staple 4711";
const NOW = new Date("2025-05-01T12:00:00.000Z");


function setup(role: Principal["role"], put: OrgSecretStore["put"]) {
  const { logger, lines } = capturingLogger();
  const puts: unknown[] = [];
  const secrets = {
    put: async (input: Parameters<OrgSecretStore["put"]>[0]) => {
      puts.push(input);
      return put(input);
    },
    delete: async () => true,
  } as unknown as OrgSecretStore;
  const deps = {
    tokens: { resolveToken: async () => ({ userId: "u", orgId: "acme", role }), putToken: async () => undefined },
    secrets,
    config: parseConfig({ TABLE_NAME: "t" }),
    now: () => NOW,
    logger,
    metrics: createMetrics(),
  } as unknown as HttpDeps;
  return { deps, lines, puts };
}

function event(method: string, name: string, body?: unknown): APIGatewayProxyEventV2 {
  return {
    version: "2.0",
    routeKey: `${method} /v1/secrets/{name}`,
    rawPath: `/v1/secrets/${name}`,
    rawQueryString: "",
    headers: { authorization: "Bearer sbx_0123456789abcdefghij" },
    pathParameters: { name },
    requestContext: { requestId: "req-1", http: { method, path: `/v1/secrets/${name}` } } as APIGatewayProxyEventV2["requestContext"],
    isBase64Encoded: false,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
}

const stored = async (input: { name: string; description?: string | null }) => ({ name: input.name, description: input.description ?? null, createdAt: NOW.toISOString(), updatedAt: NOW.toISOString() });

describe("PUT /v1/secrets/{name}", () => {
  it("hands the value to the store for the caller's org and answers the metadata only", async () => {
    const { deps, lines, puts } = setup("admin", stored);
    const res = await makePutSecretHandler(deps)(event("PUT", "DEPLOY_KEY", { value: VALUE, description: "deploys" }), buildLambdaContext("PutSecret", "req-1"));
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body ?? "")).toEqual({ secret: { name: "DEPLOY_KEY", description: "deploys", createdAt: NOW.toISOString(), updatedAt: NOW.toISOString() } });
    expect(puts).toEqual([{ orgId: "acme", name: "DEPLOY_KEY", value: VALUE, description: "deploys", now: NOW }]);
    expect(lines.join("\n")).toContain("request completed");
    expect(lines.join("\n")).not.toContain(VALUE);
  });

  it("omits the description when the body does (the store keeps the stored one)", async () => {
    const { deps, puts } = setup("admin", stored);
    await makePutSecretHandler(deps)(event("PUT", "DEPLOY_KEY", { value: VALUE }), buildLambdaContext("PutSecret", "req-1"));
    expect(puts).toEqual([{ orgId: "acme", name: "DEPLOY_KEY", value: VALUE, now: NOW }]);
  });

  it("a member gets 403 and the store never sees the value", async () => {
    const { deps, lines, puts } = setup("member", stored);
    const res = await makePutSecretHandler(deps)(event("PUT", "DEPLOY_KEY", { value: VALUE }), buildLambdaContext("PutSecret", "req-1"));
    expect(res.statusCode).toBe(403);
    expect(JSON.parse(res.body ?? "")).toEqual({ error: { code: "forbidden", message: "this route needs the admin role" } });
    expect(puts).toEqual([]);
    expect(lines.join("\n")).not.toContain(VALUE);
  });

  it("a rejected body (unknown field, bad name) is 400 and its value is in neither the answer nor the log", async () => {
    const { deps, lines } = setup("admin", stored);
    const unknown = await makePutSecretHandler(deps)(event("PUT", "DEPLOY_KEY", { value: VALUE, extra: VALUE }), buildLambdaContext("PutSecret", "req-1"));
    expect(unknown.statusCode).toBe(400);
    const badName = await makePutSecretHandler(deps)(event("PUT", "9LIVES", { value: VALUE }), buildLambdaContext("PutSecret", "req-1"));
    expect(badName.statusCode).toBe(400);
    expect(JSON.parse(badName.body ?? "").error.message).toMatch(/^name: must match/);
    for (const text of [unknown.body, badName.body, ...lines]) expect(text).not.toContain(VALUE);
  });

  it("a store failure is a generic 500 and the log holds no value", async () => {
    const { deps, lines } = setup("admin", () => Promise.reject(new Error("KMS unavailable")));
    const res = await makePutSecretHandler(deps)(event("PUT", "DEPLOY_KEY", { value: VALUE }), buildLambdaContext("PutSecret", "req-1"));
    expect(res.statusCode).toBe(500);
    expect(JSON.parse(res.body ?? "")).toEqual({ error: { code: "internal_error", message: "internal error; request id req-1" } });
    const log = lines.join("\n");
    expect(log).toContain("KMS unavailable");
    expect(log).not.toContain(VALUE);
  });
});

describe("DELETE /v1/secrets/{name}", () => {
  it("is admin only", async () => {
    expect((await makeDeleteSecretHandler(setup("member", stored).deps)(event("DELETE", "X"), buildLambdaContext("DeleteSecret", "r"))).statusCode).toBe(403);
    expect((await makeDeleteSecretHandler(setup("admin", stored).deps)(event("DELETE", "X"), buildLambdaContext("DeleteSecret", "r"))).statusCode).toBe(204);
  });
});
