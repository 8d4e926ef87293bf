/**
 * The worker acts in the bound org as `slack:<teamId>:<userId>` through the ordinary HTTP route
 * handlers (create, prompt, resume, pause, stop): the same validation, quotas, credit checks and
 * flows as any API client, and their answers (status and `error.code`) as the outcome. The
 * principal is handed to the handler through a one-request token that resolves in this process
 * only (never stored, never valid anywhere else).
 */
import { randomBytes } from "node:crypto";
import type { APIGatewayProxyEventV2, Context } from "aws-lambda";
import type { Principal } from "../domain/principal";
import type { HttpDeps, HttpHandler } from "../http/http-handler";
import { HTTP_ROUTES } from "../http/routes";

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
  /** `error.code` / `error.message` of a 4xx/5xx. */
  code: string | null;
  message: string | null;
}

export function slackPrincipal(orgId: string, teamId: string, userId: string): Principal {
  return { orgId, userId: `slack:${teamId}:${userId}`, role: "member" };
}

/** Budget exhausted (issue 16: 402 `credits_exhausted`) or a quota (429 `quota_exceeded`). */
export function isBudgetExhausted(answer: ApiAnswer): boolean {
  return answer.status === 402 || answer.status === 429 || answer.code === "credits_exhausted" || answer.code === "quota_exceeded";
}

const CONTEXT = { functionName: "slack-worker", awsRequestId: "slack", getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

export class SlackSessionApi {
  private readonly handlers = new Map<string, HttpHandler>();

  constructor(private readonly deps: HttpDeps) {}

  private handler(routeId: string, newSessionId?: string): HttpHandler {
    const cacheKey = newSessionId ? undefined : routeId;
    const cached = cacheKey ? this.handlers.get(cacheKey) : undefined;
    if (cached) return cached;
    const route = HTTP_ROUTES.find((r) => r.id === routeId);
    if (!route) throw new Error(`no HTTP route ${routeId}`);
    const made = route.make({ ...this.deps, ...(newSessionId ? { newSessionId: () => newSessionId } : {}), tokens: this.tokens() });
    if (cacheKey) this.handlers.set(cacheKey, made);
    return made;
  }

  private readonly grants = new Map<string, Principal>();

  private tokens(): HttpDeps["tokens"] {
    const real = this.deps.tokens;
    return {
      resolveToken: async (token, now) => this.grants.get(token) ?? real.resolveToken(token, now),
      putToken: (token, principal, now, options) => real.putToken(token, principal, now, options),
    };
  }

  async call(principal: Principal, routeId: string, input: { path: string; body?: unknown; params?: Record<string, string>; newSessionId?: string; headers?: Record<string, string> }): Promise<ApiAnswer> {
    const route = HTTP_ROUTES.find((r) => r.id === routeId);
    if (!route) throw new Error(`no HTTP route ${routeId}`);
    const token = `slk_${randomBytes(24).toString("base64url")}`;
    this.grants.set(token, principal);
    try {
      const now = this.deps.now();
      const event: APIGatewayProxyEventV2 = {
        version: "2.0",
        routeKey: `${route.method} ${route.path}`,
        rawPath: input.path,
        rawQueryString: "",
        headers: { ...input.headers, authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(input.params ? { pathParameters: input.params } : {}),
        requestContext: {
          accountId: "slack",
          apiId: "slack",
          domainName: "slack",
          domainPrefix: "slack",
          http: { method: route.method, path: input.path, protocol: "HTTP/1.1", sourceIp: "127.0.0.1", userAgent: "slack-worker" },
          requestId: `slack-${token.slice(4, 16)}`,
          routeKey: `${route.method} ${route.path}`,
          stage: "$default",
          time: now.toUTCString(),
          timeEpoch: now.getTime(),
        },
        ...(input.body !== undefined ? { body: JSON.stringify(input.body) } : {}),
        isBase64Encoded: false,
      };
      const result = await this.handler(routeId, input.newSessionId)(event, CONTEXT);
      let body: Record<string, unknown> = {};
      try {
        body = result.body ? (JSON.parse(result.body) as Record<string, unknown>) : {};
      } catch {
        body = {};
      }
      const error = (body.error ?? null) as { code?: string; message?: string } | null;
      return { status: result.statusCode ?? 500, body, code: error?.code ?? null, message: error?.message ?? null };
    } finally {
      this.grants.delete(token);
    }
  }
}
