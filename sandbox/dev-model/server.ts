/**
 * The development model (API.md "Local runtime"): a tiny OpenAI-compatible chat-completions
 * server that lets the local sandbox run a real OpenCode agent with no LLM key and no network.
 * A turn streams back `echo: <prompt>`; a prompt containing `sleep <N>s` first makes a real
 * `bash` tool call (`sleep N`), so the agent stays busy for N seconds like a long tool call; a
 * prompt line `$ <command>` makes it run that command with the same tool (tests: an agent commit);
 * a prompt line `/tool <name> <JSON>` calls that tool and answers with its result (tool-keyword.ts).
 * `read outside <path>` reads a file outside the workspace with the `read` tool (OpenCode asks
 * permission for it); `fail <status>` makes the model `echo` refuse the request like a provider
 * (429 rate limit, 401 bad key, 402 billing) while `echo-backup` answers (failover tests).
 * `pause <N>s` streams the first half of the echo, holds the stream N seconds, then the rest (a
 * client joining mid-answer, issue 25). `answer empty once`: the first request for that prompt gets
 * an empty answer (no text, no tool call, no error), later ones the echo: the symptom of OpenCode
 * ending a turn at once when a prompt lands as its loop winds down (issue 25, relay/empty-turns.ts).
 * OpenCode talks to it through `@ai-sdk/openai-compatible`, so the wire shape must stay the
 * OpenAI one: SSE `data: {chunk}` lines ending in `data: [DONE]`, tool calls as streamed
 * `tool_calls` deltas and `finish_reason: "tool_calls"`.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { toolKeywordReply } from "./tool-keyword";

export const DEV_MODEL_ID = "echo";
/**
 * A second model on the same server (OpenCode config: `dev/echo-backup`): it answers like
 * `echo` but never fails on `fail <status>`, so a failover chain `dev/echo` -> `dev/echo-backup`
 * can be exercised end to end.
 */
export const DEV_BACKUP_MODEL_ID = "echo-backup";

interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: string;
}

interface ChatRequest {
  model?: string;
  stream?: boolean;
  messages?: ChatMessage[];
  tools?: unknown[];
}

export type DevModelReply =
  | { kind: "text"; text: string; pauseMs?: number; emptyOnce?: boolean }
  | { kind: "tool_call"; name: string; arguments: Record<string, unknown> }
  /** The provider refuses the request with this HTTP status and an OpenAI-shaped error body. */
  | { kind: "error"; status: number; body: { error: { message: string; type: string; code: string } } };

/** Text of a message whose content is a string or an array of `{type: "text", text}` parts. */
export function messageText(message: ChatMessage): string {
  const { content } = message;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((p): p is { type: "text"; text: string } => typeof p === "object" && p !== null && p.type === "text" && typeof p.text === "string")
    .map((p) => p.text)
    .join("\n");
}

/**
 * OpenCode appends synthetic parts to user messages (system reminders in `<...>` blocks);
 * the echo is about what the person typed, so those are left out.
 */
function promptText(message: ChatMessage): string {
  return messageText(message)
    .replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, "")
    .trim();
}

const SLEEP_PATTERN = /\bsleep\s+(\d+(?:\.\d+)?)s\b/i;
/** `fail 429` (rate limit), `fail 401` (bad key), `fail 402` (billing), `fail 500`: the model `echo` refuses the request. */
const FAIL_PATTERN = /\bfail (\d{3})\b/i;
/** `pause <N>s`: the answer's stream stops for N seconds halfway. */
const PAUSE_PATTERN = /\bpause\s+(\d+(?:\.\d+)?)s\b/i;
/** `answer empty once`: the first answer to the prompt is empty. */
const EMPTY_ONCE_PATTERN = /\banswer empty once\b/i;
/** `read outside <absolute path>`: a `read` tool call on a file outside the workspace, which OpenCode asks permission for. */
const READ_OUTSIDE_PATTERN = /\bread outside (\/\S+)/i;

/** The OpenAI-style error bodies a real provider answers with (what OpenCode classifies). */
export function providerError(status: number): Extract<DevModelReply, { kind: "error" }> {
  const known: Record<number, { message: string; type: string; code: string }> = {
    401: { message: "Incorrect API key provided: sk-dev-****. You can find your API key in your account settings.", type: "invalid_request_error", code: "invalid_api_key" },
    402: { message: "You exceeded your current quota, please check your plan and billing details.", type: "insufficient_quota", code: "insufficient_quota" },
    429: { message: "Rate limit reached for requests. Please try again later.", type: "rate_limit_error", code: "rate_limit_exceeded" },
  };
  return { kind: "error", status, body: { error: known[status] ?? { message: `The development model failed with HTTP ${status}.`, type: "server_error", code: "server_error" } } };
}
/** A prompt line `$ <command>` makes the model run that command with the real `bash` tool. */
const RUN_PATTERN = /^\s*\$ (.+)$/m;

/** Decides the model's answer from the conversation; pure, so the unit tests can read it. */
export function planReply(messages: ChatMessage[], model: string = DEV_MODEL_ID): DevModelReply {
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "user") {
      lastUser = i;
      break;
    }
  }
  const user = messages[lastUser];
  const prompt = user ? promptText(user) : "";
  // A tool result after the last user message means this turn already ran its tool call.
  const toolDone = messages.slice(lastUser + 1).some((m) => m.role === "tool");
  // `/tool <name> <json>`: call that tool, then answer with its result (./tool-keyword.ts).
  const named = toolKeywordReply(prompt, messages.slice(lastUser + 1));
  if (named) return named;
  const fail = FAIL_PATTERN.exec(prompt);
  if (fail?.[1] && model !== DEV_BACKUP_MODEL_ID) return providerError(Number(fail[1]));
  const outside = READ_OUTSIDE_PATTERN.exec(prompt);
  if (outside?.[1] && !toolDone) return { kind: "tool_call", name: "read", arguments: { filePath: outside[1] } };
  const run = RUN_PATTERN.exec(prompt);
  if (run?.[1] && !toolDone) {
    return { kind: "tool_call", name: "bash", arguments: { command: run[1], description: "Run the requested command" } };
  }
  const sleep = SLEEP_PATTERN.exec(prompt);
  if (sleep && !toolDone) {
    const seconds = sleep[1] ?? "0";
    return {
      kind: "tool_call",
      name: "bash",
      arguments: { command: `sleep ${seconds}`, description: `Sleep for ${seconds} seconds` },
    };
  }
  const pause = PAUSE_PATTERN.exec(prompt);
  return { kind: "text", text: `echo: ${prompt}`, ...(pause ? { pauseMs: Number(pause[1]) * 1000 } : {}), ...(EMPTY_ONCE_PATTERN.test(prompt) ? { emptyOnce: true } : {}) };
}

/** Title and summary requests are one-shot side calls; they must answer fast and short. */
function isTitleRequest(messages: ChatMessage[]): boolean {
  const system = messages.filter((m) => m.role === "system").map(messageText).join("\n");
  return /title/i.test(system) && /generat/i.test(system);
}

/** Splits text into a few deltas so clients see real incremental streaming. */
export function splitDeltas(text: string, parts = 4): string[] {
  const size = Math.max(1, Math.ceil(text.length / parts));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length > 0 ? out : [""];
}

let callCounter = 0;

/** The OpenAI streaming chunks for one reply, in order (without the `[DONE]` terminator). */
export function replyChunks(reply: Exclude<DevModelReply, { kind: "error" }>, model: string, now = Date.now()): object[] {
  const id = `chatcmpl-dev-${now.toString(36)}-${(callCounter++).toString(36)}`;
  const created = Math.floor(now / 1000);
  const chunk = (delta: object, finish: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const usage = {
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
  if (reply.kind === "text") {
    return [
      chunk({ role: "assistant", content: "" }, null),
      ...splitDeltas(reply.text).map((text) => chunk({ content: text }, null)),
      chunk({}, "stop"),
      usage,
    ];
  }
  const args = JSON.stringify(reply.arguments);
  const callId = `call_dev_${id.slice(-8)}`;
  return [
    chunk({ role: "assistant", content: null, tool_calls: [{ index: 0, id: callId, type: "function", function: { name: reply.name, arguments: "" } }] }, null),
    ...splitDeltas(args, 3).map((piece) => chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }, null)),
    chunk({}, "tool_calls"),
    usage,
  ];
}

/** The non-streaming `chat.completion` body for one reply. */
export function replyCompletion(reply: Exclude<DevModelReply, { kind: "error" }>, model: string, now = Date.now()): object {
  const message =
    reply.kind === "text"
      ? { role: "assistant", content: reply.text }
      : {
          role: "assistant",
          content: null,
          tool_calls: [{ id: `call_dev_${now.toString(36)}`, type: "function", function: { name: reply.name, arguments: JSON.stringify(reply.arguments) } }],
        };
  return {
    id: `chatcmpl-dev-${now.toString(36)}`,
    object: "chat.completion",
    created: Math.floor(now / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: reply.kind === "text" ? "stop" : "tool_calls" }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Prompts already answered empty once (`answer empty once`), by their echo. */
const answeredEmpty = new Set<string>();

async function handleChat(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body: ChatRequest;
  try {
    body = JSON.parse(await readBody(req)) as ChatRequest;
  } catch {
    sendJson(res, 400, { error: { message: "request body is not JSON", type: "invalid_request_error" } });
    return;
  }
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const model = typeof body.model === "string" ? body.model : DEV_MODEL_ID;
  let reply: DevModelReply = isTitleRequest(messages) ? { kind: "text", text: "Echo session" } : planReply(messages, model);
  if (reply.kind === "text" && reply.emptyOnce && !answeredEmpty.has(reply.text)) {
    answeredEmpty.add(reply.text);
    reply = { kind: "text", text: "" };
  }
  if (reply.kind === "error") {
    // No retry-after header: OpenCode would otherwise wait it out before its next attempt.
    sendJson(res, reply.status, reply.body);
    return;
  }
  if (body.stream !== true) {
    sendJson(res, 200, replyCompletion(reply, model));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const chunks = replyChunks(reply, model);
  // `pause <N>s`: the role chunk and the first two of the four text deltas, the pause, the rest.
  const pauseAt = reply.kind === "text" && reply.pauseMs ? 3 : -1;
  for (const [i, c] of chunks.entries()) {
    if (i === pauseAt) await new Promise((resolve) => setTimeout(resolve, reply.kind === "text" ? reply.pauseMs : 0));
    res.write(`data: ${JSON.stringify(c)}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}

export interface DevModelServer {
  /** Base URL including `/v1`, the shape an OpenAI-compatible client's `baseURL` wants. */
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The bearer key of a request, hashed; null without one. */
function presentedKeySha256(req: IncomingMessage): string | null {
  const key = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? "")?.[1];
  return key ? createHash("sha256").update(key, "utf8").digest("hex") : null;
}

/**
 * Starts the server; port 0 (the default) lets the OS allocate a free port. With
 * `requiredKeySha256` every request must carry a bearer key hashing to it (like a real model
 * provider refusing a missing or wrong key): the proof that a configured key reached OpenCode.
 */
export async function startDevModelServer(opts: { port?: number; host?: string; requiredKeySha256?: string | null } = {}): Promise<DevModelServer> {
  const host = opts.host ?? "127.0.0.1";
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (opts.requiredKeySha256 && presentedKeySha256(req) !== opts.requiredKeySha256) {
      sendJson(res, 401, { error: { message: "invalid api key", type: "authentication_error", code: "invalid_api_key" } });
      return;
    }
    if (req.method === "POST" && path === "/v1/chat/completions") {
      handleChat(req, res).catch((err: unknown) => {
        if (!res.headersSent) sendJson(res, 500, { error: { message: String(err), type: "server_error" } });
        else res.end();
      });
      return;
    }
    if (req.method === "GET" && path === "/v1/models") {
      sendJson(res, 200, { object: "list", data: [{ id: DEV_MODEL_ID, object: "model", created: 0, owned_by: "dev" }] });
      return;
    }
    sendJson(res, 404, { error: { message: `no route ${req.method ?? ""} ${path ?? ""}`, type: "invalid_request_error" } });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/v1`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
