/**
 * The OpenAPI 3.1 document of the HTTP API, generated with `zod-openapi` from the contract's
 * schemas (./http.ts: the handlers' own request schemas). It holds exactly the routes served
 * (`served`: the route tables, functions/http/routes.ts and functions/slack/routes.ts), so a
 * route of the contract not deployed yet is not in it, and a served route missing from the
 * contract is an error (the test in test/unit/openapi-document.test.ts names it).
 * Served at `GET /v1/openapi.json`, unauthenticated: it describes the API and holds no secrets.
 */
import * as z from "zod";
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject } from "zod-openapi";
import { CONTRACT_OPERATIONS, ErrorBody, IDEMPOTENCY_KEY_HEADER_NAME, type ContractOperation } from "./http";

export const OPENAPI_PATH = "/v1/openapi.json";

export interface ServedRoute {
  method: string;
  path: string;
}

const routeKey = (r: ServedRoute): string => `${r.method.toUpperCase()} ${r.path}`;

/** Served routes the contract does not describe (they must be added to CONTRACT_OPERATIONS). */
export function undocumentedRoutes(served: readonly ServedRoute[]): string[] {
  const known = new Set(CONTRACT_OPERATIONS.map(routeKey));
  return served.map(routeKey).filter((k) => !known.has(k));
}

const ERROR_STATUSES: Record<string, string> = {
  "400": "Invalid input (the message names the field)",
  "401": "No or invalid token",
  "402": "The org's credits are spent (credits_exhausted)",
  "403": "Not yours, or admin only",
  "404": "Unknown id",
  "409": "Not allowed in the current state (the message names the state)",
  "413": "Body too large",
  "429": "Throttled or over quota",
  "500": "Internal error (only a request id)",
};

const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: ErrorBody } } });

function pathParams(path: string): z.ZodObject | undefined {
  const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? "");
  if (names.length === 0) return undefined;
  return z.object(Object.fromEntries(names.map((n) => [n, z.string().min(1)])));
}

function operation(op: ContractOperation): ZodOpenApiOperationObject {
  const path = pathParams(op.path);
  const header = op.idempotencyKey
    ? z.object({ [IDEMPOTENCY_KEY_HEADER_NAME.toLowerCase()]: z.string().min(1).max(255).optional().meta({ description: "Names the prompt: a retry with the same key stores nothing more" }) })
    : undefined;
  const errors = Object.fromEntries(
    Object.entries(ERROR_STATUSES)
      .filter(([status]) => op.auth === "bearer" || !["401", "402", "403"].includes(status) || op.auth !== "none")
      .map(([status, description]) => [status, errorResponse(description)]),
  );
  return {
    operationId: op.operationId,
    summary: op.summary,
    tags: [op.tag],
    ...(op.admin ? { description: "Admin only: a member token gets 403." } : {}),
    security: op.auth === "bearer" ? [{ bearerAuth: [] }] : op.auth === "slack" ? [{ slackSignature: [] }] : op.auth === "sandbox" ? [{ sandboxSignature: [] }] : [],
    ...(path || op.query || header ? { requestParams: { ...(path ? { path } : {}), ...(op.query ? { query: op.query } : {}), ...(header ? { header } : {}) } } : {}),
    ...(op.body ? { requestBody: { required: true, content: { [op.bodyType ?? "application/json"]: { schema: op.body } } } } : {}),
    responses: {
      [String(op.status)]: op.response ? { description: "OK", content: { "application/json": { schema: op.response } } } : { description: "OK (no body)" },
      ...errors,
    },
  };
}

/** The document for the routes served (method + path), in contract order. */
export function openApiDocument(served: readonly ServedRoute[], options: { version?: string; serverUrl?: string } = {}): Record<string, unknown> {
  const wanted = new Set(served.map(routeKey));
  const paths: ZodOpenApiPathsObject = {};
  for (const op of CONTRACT_OPERATIONS) {
    if (!wanted.has(routeKey(op))) continue;
    const item = (paths[op.path] ??= {});
    (item as Record<string, ZodOpenApiOperationObject>)[op.method.toLowerCase()] = operation(op);
  }
  return createDocument(
    {
      openapi: "3.1.0",
      info: {
        title: "Sandbox control plane API",
        version: options.version ?? "1.1",
        description: "Sessions of coding agents in sandboxes (API.md v1.1). The WebSocket API is described in API.md \"WebSocket\".",
        license: { name: "UNLICENSED", identifier: "UNLICENSED" },
      },
      ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : { servers: [{ url: "/" }] }),
      tags: [...new Set(CONTRACT_OPERATIONS.map((o) => o.tag))].map((name) => ({ name, description: `${name} routes` })),
      components: {
        securitySchemes: {
          bearerAuth: { type: "http", scheme: "bearer", description: "An API token" },
          slackSignature: { type: "apiKey", in: "header", name: "X-Slack-Signature", description: "Slack's v0 signature over the raw body" },
          sandboxSignature: { type: "apiKey", in: "header", name: "Authorization", description: "A sandbox's signature with its session's sandbox key (sidecars only)" },
        },
      },
      paths,
    },
    { reused: "inline" },
  ) as unknown as Record<string, unknown>;
}
