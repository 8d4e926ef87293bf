/**
 * The agent client port (ports/agent-client.ts) over OpenCode's HTTP API and `/event` SSE
 * stream; one implementation for every provider, since each gives an OpenCode base URL.
 * Requests go through OpenCode's own generated client, `@opencode-ai/sdk` (pinned to the
 * `opencode-ai` version; test/unit/opencode-sdk-version.test.ts fails when they drift, and
 * test/adapter/opencode-sdk-contract.test.ts runs this client against that `opencode serve`).
 * Every failure is an `AgentUnavailableError` whose message never holds the base URL nor the
 * endpoint's authorization, and whose echoed response text is redacted.
 *
 * Authentication (OpenCode 1.18.33 with `OPENCODE_SERVER_PASSWORD`, asserted in
 * test/adapter/opencode-agent-client.test.ts): every route, `/event` and `/doc` included, answers
 * 401 with an empty body and `WWW-Authenticate: Basic` unless the request carries
 * `Authorization: Basic base64("opencode:" + password)` (or the same value base64-encoded in an
 * `auth_token` query parameter); only CORS preflights pass without it. A 401 is not retryable:
 * the same credential gets the same answer.
 *
 * A second `prompt_async` while a turn is busy (observed on OpenCode 1.18.33, asserted in
 * test/adapter/opencode-agent-client.test.ts): it is accepted (204) and queued, neither
 * rejected nor aborting the first turn. The running step finishes (the `sleep 3s` bash tool
 * call completes), then the same busy loop continues with the newest user message: both user
 * messages are stored, the first turn's assistant message holds only the completed tool call,
 * the text answer (`echo: <second prompt>`) is parented to the second prompt with the whole
 * history in context, and the session stays busy throughout, with one `session.idle` at the end.
 * The development model answers the last user message only, so no `echo: <first prompt>` appears.
 *
 * `GET /session/status` is a map of session id to `{type: "busy" | "retry" | "idle", ...}`;
 * idle sessions are absent (an idle server answers `{}`).
 */
import { createParser } from "eventsource-parser";
import * as z from "zod";
import { AgentUnavailableError } from "../domain/errors";
import { redactSecrets } from "../observability/redact-secrets";
import type { AgentClient, AgentEndpoint, AgentEvent, AnswerAgain, PermissionResponse } from "../ports/agent-client";
import type { OpenCodeSdk } from "./opencode-sdk";
import { OpenCodePermissionRequest } from "../relay/permission-asks";

export type { OpenCodeSdk } from "./opencode-sdk";

export interface OpenCodeAgentClientOptions {
  /** Bound on each request, body included; for `events` only until the response headers arrive. Default 10 000. */
  requestTimeoutMs?: number;
}

const CreatedSession = z.object({ id: z.string().min(1) });
const SessionStatusMap = z.record(z.string(), z.object({ type: z.string() }));
const EventPayload = z.object({ type: z.string().min(1), properties: z.record(z.string(), z.unknown()).optional() });

/** OpenCode answers 500 (not 404) for an id without its `ses` prefix, so such ids are never asked about. */
const OPENCODE_SESSION_ID = /^ses[A-Za-z0-9_-]*$/;
const BODY_EXCERPT = 300;

/** What one SDK call answered: the HTTP status, the decoded body (2xx) or error body (other statuses). */
export interface OpenCodeAnswer {
  status: number;
  data: unknown;
  error: unknown;
}

/** The per-call options the SDK merges over its client config: the endpoint, its authorization, the deadline. */
export interface OpenCodeCallOptions {
  baseUrl: string;
  headers: Record<string, string>;
  signal: AbortSignal;
}

/** The fields-style result every SDK method returns with `throwOnError` off; `response` is absent when fetch threw. */
type SdkResult = Promise<{ data?: unknown; error?: unknown; response?: Response }>;

/** A sanitised copy: fetch errors may carry the request URL, and the cause is logged with the error. */
function redactedCause(err: unknown): Error {
  const inner = err instanceof Error && err.cause instanceof Error ? err.cause : null;
  const text = err instanceof Error ? err.message : String(err);
  const copy = new Error(redactSecrets(inner ? `${text}: ${inner.message}` : text));
  copy.name = err instanceof Error ? err.name : "Error";
  return copy;
}

/** The system error code behind a failed fetch (ECONNREFUSED, ENOTFOUND...), when there is one. */
function networkCode(err: unknown): string | null {
  const inner = err instanceof Error ? err.cause : undefined;
  const code = inner && typeof inner === "object" && "code" in inner ? (inner as { code: unknown }).code : undefined;
  return typeof code === "string" ? code : null;
}

/** The SDK hands error bodies back decoded (JSON) or as text, and an empty body as `{}`. */
function bodyExcerpt(body: unknown): string {
  const text = typeof body === "string" ? body : body && typeof body === "object" && Object.keys(body).length > 0 ? JSON.stringify(body) : "";
  return redactSecrets(text.slice(0, BODY_EXCERPT)).trim();
}

/**
 * The SDK's generated client with the error mapping this project needs, shared by the agent
 * client and the relay's message reader (functions/relay/agent-messages.ts). Built with the
 * SDK's `createClient` rather than `createOpencodeClient`: the latter turns any `text/html`
 * answer into a thrown plain `Error`, so a provider tunnel's HTML 502 page would lose its status
 * and its retryability; we need none of its directory/workspace rewriting either.
 */
/** Deadline of one agent request (body included); routes that call the agent are sized on it (infra). */
export const AGENT_REQUEST_TIMEOUT_MS = 10_000;

export class OpenCodeApi {
  /** This instance's SDK client, built on the first call (./opencode-sdk.ts: loaded then too). */
  private client: Promise<OpenCodeSdk> | undefined;

  constructor(readonly requestTimeoutMs = AGENT_REQUEST_TIMEOUT_MS) {}

  /**
   * One request with the endpoint and a deadline (`signal`; default: `requestTimeoutMs`, body
   * included), sent by `send` through the SDK client it is given. Throws only for a bad base URL
   * and for network failures; HTTP errors are answers.
   */
  async call(
    operation: string,
    endpoint: AgentEndpoint,
    send: (options: OpenCodeCallOptions, client: OpenCodeSdk) => SdkResult,
    signal?: AbortSignal,
  ): Promise<OpenCodeAnswer> {
    const options: OpenCodeCallOptions = {
      baseUrl: this.baseUrl(operation, endpoint.url),
      headers: endpoint.authorization ? { authorization: endpoint.authorization } : {},
      signal: signal ?? AbortSignal.timeout(this.requestTimeoutMs),
    };
    this.client ??= import("./opencode-sdk").then((m) => m.newOpenCodeSdk());
    const client = await this.client;
    let result: Awaited<SdkResult>;
    try {
      result = await send(options, client);
    } catch (err) {
      // The SDK returns fetch failures, but a body that cannot be read in time rejects.
      throw this.networkError(operation, err);
    }
    if (!result.response) throw this.networkError(operation, result.error);
    return { status: result.response.status, data: result.data, error: result.error };
  }

  /** The answer when it is a 2xx; any other status is an `AgentUnavailableError`, retryable for 5xx. */
  ok(operation: string, answer: OpenCodeAnswer): OpenCodeAnswer {
    if (answer.status >= 200 && answer.status < 300) return answer;
    const excerpt = bodyExcerpt(answer.error);
    throw new AgentUnavailableError(`OpenCode ${operation} failed: HTTP ${answer.status}${excerpt ? `: ${excerpt}` : ""}`, {
      retryable: answer.status >= 500,
      context: { operation, httpStatus: answer.status },
    });
  }

  /** A 2xx body that is not what this OpenCode version documents is a non-retryable failure. */
  parse<T>(operation: string, answer: OpenCodeAnswer, schema: z.ZodType<T>): T {
    const parsed = schema.safeParse(this.ok(operation, answer).data);
    if (parsed.success) return parsed.data;
    throw new AgentUnavailableError(`OpenCode ${operation} failed: unexpected response: ${bodyExcerpt(answer.data)}`, {
      context: { operation, httpStatus: answer.status },
    });
  }

  networkError(operation: string, err: unknown): AgentUnavailableError {
    const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    const code = networkCode(err);
    const why = timedOut ? `no answer within ${this.requestTimeoutMs} ms` : `unreachable${code ? ` (${code})` : ""}`;
    return new AgentUnavailableError(`OpenCode ${operation} failed: ${why}`, {
      cause: redactedCause(err),
      retryable: true,
      context: { operation, ...(code ? { networkCode: code } : {}) },
    });
  }

  /** A base URL fetch cannot use is a configuration error, not a transient one; it is never echoed. */
  private baseUrl(operation: string, url: string): string {
    let base: URL;
    try {
      base = new URL(url);
    } catch (err) {
      throw new AgentUnavailableError(`OpenCode ${operation} failed: the base URL is not a URL`, { cause: redactedCause(err), context: { operation } });
    }
    if ((base.protocol !== "http:" && base.protocol !== "https:") || base.username || base.password) {
      throw new AgentUnavailableError(`OpenCode ${operation} failed: the base URL must be http(s) without credentials`, { context: { operation } });
    }
    // The SDK appends route paths to the base as strings: no trailing slash, no query.
    return base.origin + base.pathname.replace(/\/+$/, "");
  }
}

/**
 * OpenCode events from an SSE byte stream: `eventsource-parser` frames it (lines split anywhere,
 * `\r\n` across chunks, comments and keepalives skipped, a frame cut off by the end of the stream
 * discarded); the decoder drops a leading byte order mark. Frames that are not an OpenCode event
 * (`{type, properties}`) are skipped: one bad frame must not end the stream. Ends quietly when
 * `signal` aborts, and closes the stream when the consumer stops early.
 */
export async function* openCodeEvents(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<AgentEvent> {
  // The parser is fed from the body's reader, not through `EventSourceParserStream`: two
  // TransformStreams per held stream cost the relay ~20 KiB of heap and more CPU per heartbeat
  // at 2,000 streams (bench section 5).
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const frames: string[] = [];
  const parser = createParser({ onEvent: (message) => frames.push(message.data) });
  // Cancelled here rather than trusting the fetch's signal: the SDK wraps the call in a Request
  // that undici follows only weakly, so once that Request is collected an abort no longer
  // reaches the body, and a stream the relay let go of would stay open.
  const cancel = () => void reader.cancel().catch(() => undefined);
  signal?.addEventListener("abort", cancel, { once: true });
  if (signal?.aborted) cancel();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      parser.feed(done ? decoder.decode() : decoder.decode(value, { stream: true }));
      for (const data of frames.splice(0)) {
        const event = toAgentEvent(data);
        if (event) yield event;
      }
      if (done) return;
    }
  } finally {
    signal?.removeEventListener("abort", cancel);
    cancel();
  }
}

export class OpenCodeAgentClient implements AgentClient {
  private readonly api: OpenCodeApi;

  constructor(options: OpenCodeAgentClientOptions = {}) {
    this.api = new OpenCodeApi(options.requestTimeoutMs);
  }

  /**
   * Seed 000: verify the stored agent session, create one if it is invalid. Only "not found"
   * (404, or an id OpenCode cannot hold) leads to a new session; a 5xx or network failure is
   * thrown, because a new session on a transient failure would silently fork the conversation.
   */
  async ensureSession(endpoint: AgentEndpoint, existingId?: string | null): Promise<string> {
    const { api } = this;
    if (existingId && OPENCODE_SESSION_ID.test(existingId)) {
      const found = await api.call("ensureSession", endpoint, (o, { sdk }) => sdk.session.get({ sessionID: existingId }, o));
      if (found.status >= 200 && found.status < 300) return existingId;
      if (found.status !== 404 && found.status !== 400) api.ok("ensureSession", found);
    }
    const created = await api.call("ensureSession", endpoint, (o, { sdk }) => sdk.session.create({}, o));
    return api.parse("ensureSession", created, CreatedSession).id;
  }

  async promptAsync(endpoint: AgentEndpoint, agentSessionId: string, text: string, options: { model?: string } = {}): Promise<void> {
    const { api } = this;
    const slash = options.model?.indexOf("/") ?? -1;
    const model = options.model && slash > 0 ? { providerID: options.model.slice(0, slash), modelID: options.model.slice(slash + 1) } : undefined;
    api.ok(
      "promptAsync",
      await api.call("promptAsync", endpoint, (o, { sdk }) => sdk.session.promptAsync({ sessionID: agentSessionId, parts: [{ type: "text", text }], ...(model ? { model } : {}) }, o)),
    );
  }

  /**
   * OpenCode 1.18.33 (measured against the binary; test/adapter/opencode-agent-client.test.ts
   * "answerAgain", test/e2e/relay-joiners.test.ts): sending a
   * user message again with its own `messageID` while its answer stands appends a second copy of
   * the text part and starts no new answer. `POST /session/{id}/revert {messageID: answer}` first
   * stages the answer (and everything after it) for removal; the next prompt removes it, and the
   * same `messageID` with the same part id then updates the user message in place (one part) and
   * starts a new answer to it.
   */
  async answerAgain(endpoint: AgentEndpoint, agentSessionId: string, again: AnswerAgain): Promise<void> {
    const { api } = this;
    const answerId = again.answerId;
    if (answerId) api.ok("revert", await api.call("revert", endpoint, (o, { sdk }) => sdk.session.revert({ sessionID: agentSessionId, messageID: answerId }, o)));
    const slash = again.model?.indexOf("/") ?? -1;
    const model = again.model && slash > 0 ? { providerID: again.model.slice(0, slash), modelID: again.model.slice(slash + 1) } : undefined;
    const parts = [{ id: again.partId, type: "text" as const, text: again.text }];
    api.ok(
      "promptAsync",
      await api.call("promptAsync", endpoint, (o, { sdk }) => sdk.session.promptAsync({ sessionID: agentSessionId, messageID: again.userMessageId, parts, ...(model ? { model } : {}) }, o)),
    );
  }

  /** OpenCode 1.18: `POST /permission/{requestID}/reply {reply}`; an unknown (already answered) request is a 404. */
  async replyPermission(endpoint: AgentEndpoint, permissionId: string, response: PermissionResponse): Promise<void> {
    const { api } = this;
    api.ok("replyPermission", await api.call("replyPermission", endpoint, (o, { sdk }) => sdk.permission.reply({ requestID: permissionId, reply: response }, o)));
  }

  /** OpenCode 1.18: `GET /permission` lists every session's pending requests; only this session's are kept. */
  async pendingPermissions(endpoint: AgentEndpoint, agentSessionId: string): Promise<OpenCodePermissionRequest[]> {
    const { api } = this;
    const answer = await api.call("pendingPermissions", endpoint, (o, { sdk }) => sdk.permission.list({}, o));
    return api.parse("pendingPermissions", answer, z.array(OpenCodePermissionRequest)).filter((p) => p.sessionID === agentSessionId);
  }

  async abort(endpoint: AgentEndpoint, agentSessionId: string): Promise<void> {
    const { api } = this;
    api.ok("abort", await api.call("abort", endpoint, (o, { sdk }) => sdk.session.abort({ sessionID: agentSessionId }, o)));
  }

  /** "retry" counts as busy: the turn is still running, waiting out a model provider error. */
  async isBusy(endpoint: AgentEndpoint, agentSessionId: string): Promise<boolean> {
    const { api } = this;
    const answer = await api.call("isBusy", endpoint, (o, { sdk }) => sdk.session.status({}, o));
    const entry = api.parse("isBusy", answer, SessionStatusMap)[agentSessionId];
    return entry?.type === "busy" || entry?.type === "retry";
  }

  /**
   * The request timeout bounds only the wait for the response headers; the stream itself runs
   * until `signal` aborts (then it ends quietly) or the server closes it. A connection lost
   * mid-stream throws a retryable error so the caller reconnects.
   *
   * Not the SDK's `event.subscribe()`: its stream retries by itself on every failure (a 401
   * included) and only reports errors to a callback, has no deadline for the headers apart from
   * the stream's own signal, and reconnecting is the relay's job (functions/relay/session-stream.ts:
   * backoff, heartbeat timeout, revalidation before reconnecting). The route is still requested
   * through the SDK's client, so base URL and authorization are set in one place.
   */
  async *events(endpoint: AgentEndpoint, signal: AbortSignal): AsyncIterable<AgentEvent> {
    if (signal.aborted) return;
    const { api } = this;
    const headersDeadline = new AbortController();
    const timer = setTimeout(() => headersDeadline.abort(new DOMException("timed out", "TimeoutError")), api.requestTimeoutMs);
    let answer: OpenCodeAnswer;
    try {
      answer = await api.call("events", endpoint, (o, { http }) => http.get({ url: "/event", parseAs: "stream", ...o }), AbortSignal.any([signal, headersDeadline.signal]));
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    } finally {
      clearTimeout(timer);
    }
    const body = api.ok("events", answer).data;
    if (!(body instanceof ReadableStream)) throw api.networkError("events", new Error("the event stream has no body"));
    try {
      yield* openCodeEvents(body as ReadableStream<Uint8Array>, signal);
    } catch (err) {
      if (signal.aborted) return;
      throw api.networkError("events", err);
    }
  }
}

function toAgentEvent(data: string): AgentEvent | null {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return null;
  }
  const parsed = EventPayload.safeParse(json);
  return parsed.success ? { type: parsed.data.type, properties: parsed.data.properties ?? {} } : null;
}
