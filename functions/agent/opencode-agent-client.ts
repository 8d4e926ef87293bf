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
import { request as httpRequest, type ClientRequestArgs, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { createConnection as netConnect, isIP } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { Readable } from "node:stream";
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
/** A request's error once its response arrived: the body reports it. */
const ignore = () => undefined;

/** The TCP connection of a stream opened without the http Agent (`openStream`). */
function plainStream(options: ClientRequestArgs) {
  return netConnect({ host: options.host ?? "localhost", port: Number(options.port) });
}

/**
 * The TLS connection of a stream opened without the https Agent (`openStream`): the Agent would
 * have named the server for SNI and certificate checks; an IP address is not sent as a name.
 */
function tlsStream(options: ClientRequestArgs) {
  const host = options.host ?? "localhost";
  return tlsConnect({ host, port: Number(options.port), ...(isIP(host) ? {} : { servername: host }), ALPNProtocols: ["http/1.1"] });
}

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

  /**
   * A long-lived GET (OpenCode's `/event` stream) over `node:http(s)`, not the SDK's fetch: a
   * stream held through fetch keeps a WHATWG read request and its promises pending per stream,
   * renewed at every event. Measured (5,000 streams of the bench's fake OpenCode, one event per
   * stream every 10 s): 9 KiB of heap per stream instead of 37, 0.05 ms of CPU per event instead
   * of 0.09, and half the scavenge time; at 10,000 streams the relay's GC pauses were what
   * held fan-out p99 over its target (functions/relay/README.md, "GC at 10,000"). Same base URL rules,
   * authorization and error mapping as `call`: resolves with a 2xx response once its headers
   * arrived within `requestTimeoutMs`; another status is the error `ok` throws; `signal` aborts it.
   */
  openStream(operation: string, endpoint: AgentEndpoint, path: string, signal: AbortSignal): Promise<IncomingMessage> {
    const url = new URL(this.baseUrl(operation, endpoint.url) + path);
    const secure = url.protocol === "https:";
    const send = secure ? httpsRequest : httpRequest;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const failed = (name: string, message: string) => Object.assign(new Error(message), { name });
      const req = send(url, {
        method: "GET",
        headers: { accept: "text/event-stream", ...(endpoint.authorization ? { authorization: endpoint.authorization } : {}) },
        // Its own connection, not the http(s) Agent's pool: a stream is never reused, and a pooled
        // socket keeps the Agent's listeners and options per stream (2 KiB of the ~20 a held stream costs).
        port: Number(url.port) || (secure ? 443 : 80),
        createConnection: secure ? tlsStream : plainStream,
      });
      const deadline = setTimeout(() => req.destroy(failed("TimeoutError", "no response headers in time")), this.requestTimeoutMs);
      const abort = () => req.destroy(failed("AbortError", "aborted"));
      const onError = (err: Error) => {
        settle();
        // As fetch reports them: the system error (ECONNREFUSED...) as the cause.
        reject(this.networkError(operation, err.name === "TimeoutError" || err.name === "AbortError" ? err : new Error("request failed", { cause: err })));
      };
      // Once the response is here nothing above is needed: the listeners go, so this scope (the
      // URL, the timer, these closures) is not kept for the stream's life. A later socket error
      // reaches the body (openCodeEvents); the request's own copy of it is dropped.
      const settle = () => {
        clearTimeout(deadline);
        signal.removeEventListener("abort", abort);
        req.removeListener("error", onError);
        req.on("error", ignore);
      };
      signal.addEventListener("abort", abort, { once: true });
      req.on("error", onError);
      req.once("response", (res) => {
        settle();
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          resolve(res);
          return;
        }
        // The error body (bounded), decoded as the SDK decodes one: JSON when it parses, else text.
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          if (size >= BODY_EXCERPT * 4) return;
          chunks.push(chunk);
          size += chunk.length;
        });
        const answer = () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let error: unknown = text === "" ? {} : text;
          try {
            error = JSON.parse(text);
          } catch {
            // Not JSON: the text.
          }
          try {
            this.ok(operation, { status, data: undefined, error });
          } catch (err) {
            reject(err);
          }
        };
        res.on("end", answer);
        res.on("error", answer);
      });
      req.end();
      if (signal.aborted) abort();
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

/** Events parsed ahead of the consumer before the body is paused (backpressure). */
const EVENTS_AHEAD = 64;

/**
 * OpenCode events from an SSE response body: `eventsource-parser` frames it (lines split
 * anywhere, `\r\n` across chunks, comments and keepalives skipped, a frame cut off by the end of
 * the stream discarded); the decoder drops a leading byte order mark. Frames that are not an
 * OpenCode event (`{type, properties}`) are skipped: one bad frame must not end the stream. Ends
 * quietly when `signal` aborts, throws when the body fails or closes before its end, and
 * destroys the body when the consumer stops early.
 *
 * Pushed, not pulled: chunks are parsed as they arrive and their events queued, so a stream at
 * rest holds no pending read and allocates nothing until its next chunk (`openStream` says why
 * that matters at 10,000 streams); the body pauses while `EVENTS_AHEAD` events wait.
 */
export async function* openCodeEvents(body: Readable, signal?: AbortSignal): AsyncGenerator<AgentEvent> {
  const decoder = new TextDecoder();
  const queue: AgentEvent[] = [];
  let ended = false;
  let failure: { error: unknown } | null = null;
  let wake: (() => void) | null = null;
  const notify = () => {
    const resume = wake;
    wake = null;
    resume?.();
  };
  const parser = createParser({
    onEvent: (message) => {
      const event = toAgentEvent(message.data);
      if (event) queue.push(event);
    },
  });
  const onData = (chunk: Uint8Array | string) => {
    parser.feed(typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true }));
    if (queue.length >= EVENTS_AHEAD) body.pause();
    if (queue.length > 0) notify();
  };
  const onEnd = () => {
    parser.feed(decoder.decode());
    ended = true;
    notify();
  };
  const onError = (error: unknown) => {
    failure ??= { error };
    notify();
  };
  const onClose = () => {
    if (!ended) failure ??= { error: new Error("the event stream closed before its end") };
    notify();
  };
  const cancel = () => body.destroy();
  body.on("data", onData);
  body.on("end", onEnd);
  body.on("error", onError);
  body.on("close", onClose);
  signal?.addEventListener("abort", cancel, { once: true });
  if (signal?.aborted) cancel();
  try {
    for (;;) {
      while (queue.length > 0 && !signal?.aborted) yield queue.shift() as AgentEvent;
      if (signal?.aborted) return;
      if (failure) throw (failure as { error: unknown }).error;
      if (ended) return;
      if (body.isPaused()) body.resume();
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    body.off("data", onData);
    body.off("end", onEnd);
    body.off("error", onError);
    body.off("close", onClose);
    signal?.removeEventListener("abort", cancel);
    // A body already ended is left to close by itself; anything else is let go of here.
    if (!ended) cancel();
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
   * backoff, heartbeat timeout, revalidation before reconnecting). Nor the SDK's fetch: the
   * stream is opened by `OpenCodeApi.openStream` (node:http, measured there), with the same base
   * URL rules, authorization and error mapping as the SDK's calls.
   */
  async *events(endpoint: AgentEndpoint, signal: AbortSignal): AsyncIterable<AgentEvent> {
    if (signal.aborted) return;
    const { api } = this;
    let body: IncomingMessage;
    try {
      body = await api.openStream("events", endpoint, "/event", signal);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    try {
      yield* openCodeEvents(body, signal);
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
