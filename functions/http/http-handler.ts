/**
 * The HTTP edge: one middy stack for every API route. It parses the API Gateway v2 event at the
 * edge (auth, path, query, body size, JSON, zod), hands typed data to the route's function, and
 * turns every error into API.md's format: 4xx with their message, anything else a generic 500
 * with the request id (details go to the log, redacted).
 */
import middy from "@middy/core";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from "aws-lambda";
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Metrics } from "@aws-lambda-powertools/metrics";
import * as z from "zod";
import type { ZodType } from "zod";
import type { Config } from "../config/config";
import type { SandboxKeyring } from "../config/sandbox-keyring";
import { SessionId, type ProviderType } from "../domain/session";
import { claimedSessionId, verifyAccessToken } from "../../sandbox/shared/access-token";
import type { SandboxProvider } from "../ports/sandbox-provider";
import { AppError, PayloadTooLargeError, UnauthorizedError, ValidationError } from "../domain/errors";
import type { Principal } from "../domain/principal";
import { errorForLog } from "../observability/logger";
import { MetricUnit, REQUEST_METRICS } from "../observability/metrics";
import type { AgentClient } from "../ports/agent-client";
import type { FlowRunner } from "../ports/flow-runner";
import type { OrgSecretStore } from "../ports/org-secrets";
import type { OrgSettingsStore } from "../ports/org-settings";
import type { LifecycleScheduler } from "../ports/lifecycle-scheduler";
import type { ClientPush } from "../ports/client-push";
import type { ConnectionRegistry, LifecycleEventLog, PromptQueue, ProxyConnectionRegistry } from "../ports/session-items";
import type { SessionSettingsStore } from "../ports/session-settings";
import type { TranscriptStore } from "../ports/transcript";
import type { RelayLeaseStore, RelayNudge } from "../ports/relay";
import type { ApiTokenStore, SessionStore } from "../ports/session-store";
import type { WsTicketStore } from "../ports/ws-tickets";
import type { RepoCatalog } from "../ports/repo-catalog";
import type { BuildRunner } from "../ports/build-runner";
import { buildSandboxKey, isBuildId } from "../builds/build-sandbox";
import type { OrgUsageStore } from "../ports/org-usage";

/** Everything a route function may touch, passed in (STYLE.md 1): no module-level I/O. */
export interface HttpDeps {
  sessions: SessionStore;
  tokens: ApiTokenStore;
  /** WebSocket connect tickets (API.md v1.1), minted by POST /v1/sessions/{id}/ws-ticket. */
  wsTickets: WsTicketStore;
  prompts: PromptQueue;
  events: LifecycleEventLog;
  transcript: TranscriptStore;
  /** Starts lifecycle flows (Step Functions in AWS, the local runner locally). */
  flows: FlowRunner;
  /** Prompt delivery waits for a relay to watch the session. */
  relayLeases: Pick<RelayLeaseStore, "watched">;
  /** Prompt delivery nudges a relay to claim a running session nobody watches (issue 15). */
  relayNudge?: RelayNudge;
  /** Terminal / editor proxy connections (seed 002 constraint 8). */
  proxies: ProxyConnectionRegistry;
  /** Idle checks armed when a proxy closes. */
  scheduler: LifecycleScheduler;
  /** Delivers prompts to a running session's agent. */
  agent: AgentClient;
  /** The session's provider (sidecar access resolves where its sandbox answers). */
  provider: (type: ProviderType) => Promise<SandboxProvider>;
  /** Sandbox keys: sidecar access tokens are signed with the session's key. */
  sandboxKeys: SandboxKeyring;
  /** The org's secrets (API.md "Secrets"): the /v1/secrets routes, and references checked on create. */
  secrets: OrgSecretStore;
  /** The org's settings: its default model (`/v1/org/model`). */
  orgSettings: OrgSettingsStore;
  /** What the agent saves from its sandbox (its service commands and env files). */
  sessionSettings: SessionSettingsStore;
  /** The session's WebSocket clients, for what the agent asks of them (`env.requested`). */
  connections: ConnectionRegistry;
  push: ClientPush;
  config: Config;
  now: () => Date;
  newSessionId: () => string;
  logger: Logger;
  metrics: Metrics;
  /** The org's repositories, prebuilds and builds (API.md "Repositories and prebuilds"). */
  catalog: RepoCatalog;
  /** Starts the snapshot builder (Step Functions in AWS, the local runner locally). */
  builds: BuildRunner;
  /** Usage and limits (API.md "Usage, limits and credits"): create, resume and wake check them. */
  usage: OrgUsageStore;
}

export interface HttpRequest<B, P, Q> {
  body: B;
  params: P;
  query: Q;
  /** The session whose sandbox called (routes declared `auth: "sandbox"`), else null. */
  sandboxSessionId: string | null;
  /** The build whose sandbox called (routes declared `auth: "sandbox"` with `buildSandboxes`), else null. */
  sandboxBuildId?: string | null;
  /** Null only on routes declared `auth: false` or `"sandbox"`. */
  principal: Principal | null;
  requestId: string;
  /** The request's headers (names lower case, as API Gateway v2 gives them). */
  headers?: Record<string, string | undefined>;
}

export interface HttpResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouteSpec<B, P, Q> {
  /** Metric and log name, e.g. "CreateSession". */
  name: string;
  /**
   * `true`: an API token; `"sandbox"`: an access token a sandbox's sidecar signed with its
   * session's sandbox key (the sandbox calling back for its credentials); `false`: none.
   */
  auth: boolean | "sandbox";
  /**
   * With `auth: "sandbox"`: a build sandbox's token (signed with its build's key,
   * functions/builds/build-sandbox.ts) is accepted too, and its build id is `sandboxBuildId`.
   * Other sandbox routes refuse build sandboxes (401, like any bad credential).
   */
  buildSandboxes?: boolean;
  body?: ZodType<B>;
  params?: ZodType<P>;
  query?: ZodType<Q>;
}

export type HttpHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyStructuredResultV2>;

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" };

/** "field.path: message" for the first zod issue: the message names the field (API.md). */
export function describeZodError(error: z.ZodError, root: string): string {
  const issue = error.issues[0];
  if (!issue) return `${root}: invalid`;
  if (issue.code === "unrecognized_keys") {
    const prefix = issue.path.length ? `${root}.${issue.path.join(".")}` : root;
    return `${prefix}: unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
  }
  const path = [root, ...issue.path.map(String)].filter(Boolean).join(".");
  return `${path}: ${issue.message}`;
}

function parseWith<T>(schema: ZodType<T> | undefined, value: unknown, root: string, code: string): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(describeZodError(result.error, root), code);
  return result.data;
}

const TOKEN_SHAPE = /^[\x21-\x7e]{16,512}$/;

/** A raw API token to its principal: `UnauthorizedError` for a malformed, unknown, revoked or expired one. */
export async function principalForToken(token: string | undefined, tokens: ApiTokenStore, where: string, now: Date = new Date()): Promise<Principal> {
  if (!token) throw new UnauthorizedError(`missing ${where}`);
  if (!TOKEN_SHAPE.test(token)) throw new UnauthorizedError(`malformed ${where}`);
  const principal = await tokens.resolveToken(token, now);
  // One message for every case: a caller learns nothing about which tokens exist.
  if (!principal) throw new UnauthorizedError("invalid, expired or revoked API token");
  return principal;
}

async function authenticate(event: APIGatewayProxyEventV2, tokens: ApiTokenStore, now: Date): Promise<Principal> {
  const header = event.headers?.authorization ?? event.headers?.Authorization;
  if (!header) throw new UnauthorizedError("missing Authorization: Bearer <token> header");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1] || !TOKEN_SHAPE.test(match[1])) throw new UnauthorizedError("malformed Authorization header: expected Bearer <token>");
  return principalForToken(match[1], tokens, "Authorization header", now);
}

/**
 * A sandbox calling back: `Authorization: Bearer sca1...` signed with the key of the session it
 * names (sandbox/shared/access-token.ts), at the session's current key epoch or the next one (a
 * sandbox being provisioned asks for git credentials before the flow commits it). An older
 * epoch's key is refused. Where the route takes build sandboxes (`buildSandboxes`), a token naming
 * a build id is checked with that build's key (functions/builds/build-sandbox.ts). Any failure is
 * the same 401, naming no reason.
 */
async function authenticateSandbox(event: APIGatewayProxyEventV2, keyring: SandboxKeyring, now: Date, builds = false): Promise<{ sessionId: string | null; buildId: string | null }> {
  const header = event.headers?.authorization ?? event.headers?.Authorization ?? "";
  const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] ?? "";
  const sessionId = claimedSessionId(token);
  if (builds && isBuildId(sessionId)) {
    const verdict = verifyAccessToken(token, await buildSandboxKey(keyring, sessionId), { sessionId, nowSeconds: Math.floor(now.getTime() / 1000) });
    if (verdict.ok) return { sessionId: null, buildId: sessionId };
  }
  if (sessionId && SessionId.safeParse(sessionId).success) {
    const epoch = await keyring.currentEpoch(sessionId);
    for (const at of [epoch, epoch + 1]) {
      const verdict = verifyAccessToken(token, await keyring.sandboxKey(sessionId, at), { sessionId, nowSeconds: Math.floor(now.getTime() / 1000) });
      if (verdict.ok) return { sessionId, buildId: null };
    }
  }
  throw new UnauthorizedError("a sandbox credential is required");
}

function readBody(event: APIGatewayProxyEventV2, maxBytes: number): unknown {
  if (event.body === undefined || event.body === null || event.body === "") return undefined;
  const raw = event.isBase64Encoded ? Buffer.from(event.body, "base64") : Buffer.from(event.body, "utf8");
  if (raw.byteLength > maxBytes) throw new PayloadTooLargeError(`request body is ${raw.byteLength} bytes; the limit is ${maxBytes}`);
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch {
    throw new ValidationError("body: not valid JSON", "invalid_json");
  }
}

export function json(status: number, body?: unknown, headers: Record<string, string> = {}): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: status,
    headers: { ...JSON_HEADERS, ...headers },
    body: body === undefined ? "" : JSON.stringify(body),
  };
}

export function errorResponse(err: unknown, requestId: string): APIGatewayProxyStructuredResultV2 {
  if (err instanceof AppError && err.expose) {
    return json(err.status, { error: { code: err.code, message: err.message } });
  }
  return json(500, { error: { code: "internal_error", message: `internal error; request id ${requestId}` } });
}

/** Wraps a route function into the shared middy stack, given its dependencies. */
/** Where a request's start is kept for its HttpRequestLatency datum (middy's per-invocation `internal`). */
const STARTED_AT = "httpStartedAt";

export function httpRoute<B, P, Q>(
  spec: RouteSpec<B, P, Q>,
  run: (request: HttpRequest<B, P, Q>, deps: HttpDeps) => Promise<HttpResult>,
): (deps: HttpDeps) => HttpHandler {
  return (deps) => {
    const core = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
      const requestId = event.requestContext?.requestId ?? "unknown";
      const principal = spec.auth === true ? await authenticate(event, deps.tokens, deps.now()) : null;
      const sandbox = spec.auth === "sandbox" ? await authenticateSandbox(event, deps.sandboxKeys, deps.now(), spec.buildSandboxes === true) : null;
      const sandboxSessionId = sandbox?.sessionId ?? null;
      const sandboxBuildId = sandbox?.buildId ?? null;
      const params = parseWith(spec.params, event.pathParameters ?? {}, "", "invalid_id");
      const query = parseWith(spec.query, event.queryStringParameters ?? {}, "query", "invalid_query");
      const rawBody = readBody(event, deps.config.MAX_BODY_BYTES);
      if (!spec.body && rawBody !== undefined) throw new ValidationError("body: this route takes no body");
      // Every body is a JSON object: `null`, an array or a scalar is refused, never read as `{}`.
      if (rawBody !== undefined && (rawBody === null || typeof rawBody !== "object" || Array.isArray(rawBody))) {
        throw new ValidationError(`body: must be a JSON object, not ${rawBody === null ? "null" : Array.isArray(rawBody) ? "an array" : `a ${typeof rawBody}`}`);
      }
      const body = parseWith(spec.body, rawBody ?? {}, "body", "invalid_request");
      const result = await run({ body, params, query, principal, sandboxSessionId, sandboxBuildId, requestId, headers: event.headers ?? {} }, deps);
      return json(result.status, result.body, result.headers);
    };

    const record = (status: number, internal: Record<string, unknown>) => {
      // One metric, the route and status as dimensions; logMetrics flushes it with the request.
      deps.metrics.addDimensions({ Route: spec.name, Status: String(status) });
      deps.metrics.addMetric(REQUEST_METRICS.http, MetricUnit.Count, 1);
      const startedAt = internal[STARTED_AT];
      if (typeof startedAt === "number") deps.metrics.addMetric(REQUEST_METRICS.httpLatency, MetricUnit.Milliseconds, performance.now() - startedAt);
    };
    // Powertools first: the logger carries the Lambda context (and is reset after), metrics are
    // flushed after the route's own after/onError has recorded the request (middy runs those in
    // reverse order).
    return middy<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2>()
      .use(injectLambdaContext(deps.logger, { resetKeys: true }))
      .use(logMetrics(deps.metrics))
      .use({
        before: (request) => {
          request.internal[STARTED_AT] = performance.now();
          const event = request.event;
          deps.logger.appendKeys({
            requestId: event.requestContext?.requestId,
            route: spec.name,
            sessionId: event.pathParameters?.id,
          });
        },
        after: (request) => {
          const status = request.response?.statusCode ?? 0;
          deps.logger.info("request completed", { status });
          record(status, request.internal);
        },
        onError: (request) => {
          const requestId = request.event.requestContext?.requestId ?? "unknown";
          const err = request.error;
          request.response = errorResponse(err, requestId);
          const status = request.response.statusCode ?? 500;
          if (status >= 500) deps.logger.error("request failed", { status, error: errorForLog(err) });
          else deps.logger.info("request rejected", { status, error: errorForLog(err) });
          record(status, request.internal);
        },
      })
      .handler(core) as unknown as HttpHandler;
  };
}
