/**
 * The agent client port (ports/agent-client.ts) over OpenCode's HTTP API and `/event` SSE
 * stream; one implementation for every provider, since each gives an OpenCode base URL.
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
import { z } from "zod";
import { AgentUnavailableError } from "../domain/errors";
import { redactSecrets } from "../observability/redact-secrets";
import type { AgentClient, AgentEndpoint, AgentEvent } from "../ports/agent-client";

export interface OpenCodeAgentClientOptions {
  /** Bound on each request, body included; for `events` only until the response headers arrive. Default 10 000. */
  requestTimeoutMs?: number;
}

/** One dispatched server-sent event (WHATWG HTML "event stream interpretation"). */
export interface SseMessage {
  /** The `event:` field; "message" when absent. */
  event: string;
  /** `data:` lines joined with "\n". */
  data: string;
  /** The last `id:` seen on the stream, or null. */
  id: string | null;
}

/**
 * Parses an event stream from arbitrary chunks: lines may split anywhere (inside a multi-byte
 * character, between `\r` and `\n`), comments (`:` keepalives) are skipped, and a frame cut off
 * by the end of the stream is discarded, as the spec says.
 */
export async function* parseSse(chunks: AsyncIterable<Uint8Array | string>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = "";
  let started = false;
  let data: string[] = [];
  let event = "";
  let lastId: string | null = null;

  /** Applies one line; returns the message an empty line dispatches. */
  const takeLine = (line: string): SseMessage | null => {
    if (line === "") {
      const message = data.length > 0 ? { event: event || "message", data: data.join("\n"), id: lastId } : null;
      data = [];
      event = "";
      return message;
    }
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id" && !value.includes("\0")) lastId = value;
    return null;
  };

  for await (const chunk of chunks) {
    buffer += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    if (!started && buffer.length > 0) {
      started = true;
      if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
    }
    let start = 0;
    for (;;) {
      const cr = buffer.indexOf("\r", start);
      const lf = buffer.indexOf("\n", start);
      const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      if (end < 0) break;
      // A trailing `\r` may be the first half of `\r\n`: wait for the next chunk.
      if (end === cr && end === buffer.length - 1) break;
      const message = takeLine(buffer.slice(start, end));
      start = end + (end === cr && buffer[end + 1] === "\n" ? 2 : 1);
      if (message) yield message;
    }
    buffer = buffer.slice(start);
  }
  // The stream ended: a held-back `\r` was a line end after all; anything else is a cut-off line.
  if (buffer.endsWith("\r")) {
    const message = takeLine(buffer.slice(0, -1));
    if (message) yield message;
  }
}

const CreatedSession = z.object({ id: z.string().min(1) });
const SessionStatusMap = z.record(z.string(), z.object({ type: z.string() }));
const EventPayload = z.object({ type: z.string().min(1), properties: z.record(z.string(), z.unknown()).optional() });

/** OpenCode answers 500 (not 404) for an id without its `ses` prefix, so such ids are never asked about. */
const OPENCODE_SESSION_ID = /^ses[A-Za-z0-9_-]*$/;
const BODY_EXCERPT = 300;

interface HttpAnswer {
  status: number;
  text: string;
}

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

/** The request headers plus the endpoint's `Authorization`, when it has one. */
export function withAuthorization(headers: Record<string, string>, endpoint: AgentEndpoint): Record<string, string> {
  return endpoint.authorization ? { ...headers, authorization: endpoint.authorization } : headers;
}

export class OpenCodeAgentClient implements AgentClient {
  private readonly requestTimeoutMs: number;

  constructor(options: OpenCodeAgentClientOptions = {}) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  }

  /**
   * Seed 000: verify the stored agent session, create one if it is invalid. Only "not found"
   * (404, or an id OpenCode cannot hold) leads to a new session; a 5xx or network failure is
   * thrown, because a new session on a transient failure would silently fork the conversation.
   */
  async ensureSession(endpoint: AgentEndpoint, existingId?: string | null): Promise<string> {
    if (existingId && OPENCODE_SESSION_ID.test(existingId)) {
      const found = await this.call("ensureSession", endpoint, "GET", `/session/${encodeURIComponent(existingId)}`);
      if (found.status >= 200 && found.status < 300) return existingId;
      if (found.status !== 404 && found.status !== 400) throw this.httpError("ensureSession", found);
    }
    const created = await this.call("ensureSession", endpoint, "POST", "/session", {});
    if (created.status < 200 || created.status >= 300) throw this.httpError("ensureSession", created);
    return this.parse("ensureSession", created, CreatedSession).id;
  }

  async promptAsync(endpoint: AgentEndpoint, agentSessionId: string, text: string): Promise<void> {
    const path = `/session/${encodeURIComponent(agentSessionId)}/prompt_async`;
    const answer = await this.call("promptAsync", endpoint, "POST", path, { parts: [{ type: "text", text }] });
    if (answer.status < 200 || answer.status >= 300) throw this.httpError("promptAsync", answer);
  }

  async abort(endpoint: AgentEndpoint, agentSessionId: string): Promise<void> {
    const answer = await this.call("abort", endpoint, "POST", `/session/${encodeURIComponent(agentSessionId)}/abort`, {});
    if (answer.status < 200 || answer.status >= 300) throw this.httpError("abort", answer);
  }

  /** "retry" counts as busy: the turn is still running, waiting out a model provider error. */
  async isBusy(endpoint: AgentEndpoint, agentSessionId: string): Promise<boolean> {
    const answer = await this.call("isBusy", endpoint, "GET", "/session/status");
    if (answer.status < 200 || answer.status >= 300) throw this.httpError("isBusy", answer);
    const entry = this.parse("isBusy", answer, SessionStatusMap)[agentSessionId];
    return entry?.type === "busy" || entry?.type === "retry";
  }

  /**
   * The request timeout bounds only the wait for the response headers; the stream itself runs
   * until `signal` aborts (then it ends quietly) or the server closes it. A connection lost
   * mid-stream throws a retryable error so the caller reconnects.
   */
  async *events(endpoint: AgentEndpoint, signal: AbortSignal): AsyncIterable<AgentEvent> {
    if (signal.aborted) return;
    const url = this.url("events", endpoint.url, "/event");
    const headersDeadline = new AbortController();
    const timer = setTimeout(() => headersDeadline.abort(), this.requestTimeoutMs);
    let res: Response;
    try {
      res = await fetch(url, { headers: withAuthorization({ accept: "text/event-stream" }, endpoint), signal: AbortSignal.any([signal, headersDeadline.signal]) });
    } catch (err) {
      if (signal.aborted) return;
      throw this.networkError("events", headersDeadline.signal.aborted ? new DOMException("timed out", "TimeoutError") : err);
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => "");
      throw this.httpError("events", { status: res.status, text });
    }
    try {
      for await (const message of parseSse(res.body)) {
        const event = toAgentEvent(message.data);
        if (event) yield event;
      }
    } catch (err) {
      if (signal.aborted) return;
      throw this.networkError("events", err);
    }
  }

  /** One bounded request; the body is read under the same timeout. Throws only for network failures. */
  private async call(operation: string, endpoint: AgentEndpoint, method: "GET" | "POST", path: string, body?: unknown): Promise<HttpAnswer> {
    const url = this.url(operation, endpoint.url, path);
    try {
      const res = await fetch(url, {
        method,
        headers: withAuthorization(body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" }, endpoint),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      return { status: res.status, text: await res.text() };
    } catch (err) {
      throw this.networkError(operation, err);
    }
  }

  /** A base URL fetch cannot use is a configuration error, not a transient one; it is never echoed. */
  private url(operation: string, baseUrl: string, path: string): URL {
    let base: URL;
    try {
      base = new URL(baseUrl);
    } catch (err) {
      throw new AgentUnavailableError(`OpenCode ${operation} failed: the base URL is not a URL`, { cause: redactedCause(err), context: { operation } });
    }
    if ((base.protocol !== "http:" && base.protocol !== "https:") || base.username || base.password) {
      throw new AgentUnavailableError(`OpenCode ${operation} failed: the base URL must be http(s) without credentials`, { context: { operation } });
    }
    return new URL(base.pathname.replace(/\/+$/, "") + path, base);
  }

  private networkError(operation: string, err: unknown): AgentUnavailableError {
    const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    const code = networkCode(err);
    const why = timedOut ? `no answer within ${this.requestTimeoutMs} ms` : `unreachable${code ? ` (${code})` : ""}`;
    return new AgentUnavailableError(`OpenCode ${operation} failed: ${why}`, {
      cause: redactedCause(err),
      retryable: true,
      context: { operation, ...(code ? { networkCode: code } : {}) },
    });
  }

  private httpError(operation: string, answer: HttpAnswer): AgentUnavailableError {
    const excerpt = redactSecrets(answer.text.slice(0, BODY_EXCERPT)).trim();
    return new AgentUnavailableError(`OpenCode ${operation} failed: HTTP ${answer.status}${excerpt ? `: ${excerpt}` : ""}`, {
      retryable: answer.status >= 500,
      context: { operation, httpStatus: answer.status },
    });
  }

  private parse<T>(operation: string, answer: HttpAnswer, schema: z.ZodType<T>): T {
    let json: unknown;
    try {
      json = JSON.parse(answer.text);
    } catch {
      json = undefined;
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const excerpt = redactSecrets(answer.text.slice(0, BODY_EXCERPT)).trim();
      throw new AgentUnavailableError(`OpenCode ${operation} failed: unexpected response: ${excerpt}`, {
        context: { operation, httpStatus: answer.status },
      });
    }
    return parsed.data;
  }
}

/** Frames that are not an OpenCode event (`{type, properties}`) are skipped: one bad frame must not end the stream. */
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
