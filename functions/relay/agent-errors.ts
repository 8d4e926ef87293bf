/**
 * What the agent's errors mean to clients (issue 25 §2): OpenCode's error shapes (the `error` of
 * a `session.error` event and of an assistant message, `@opencode-ai/sdk` v2 types, checked
 * against OpenCode 1.18.33 with the development model's `fail <status>`) classified into a short
 * code, with a redacted, bounded message; and the clipping of tool arguments and results that
 * are streamed to clients and kept in the transcript. Pure.
 *
 * Observed on OpenCode 1.18.33: a provider's 401 and 402 end the turn at once (`session.error`
 * `APIError {statusCode, isRetryable: false}`, then the assistant message with the same
 * `error`); a 429 is retried by OpenCode itself, indefinitely, with `session.status {type:
 * "retry", attempt, message, next}` between attempts, and never becomes a `session.error`; an
 * abort ends the turn with `MessageAbortedError`. `data.metadata.url` holds the provider's URL
 * and `responseHeaders` its headers: neither is ever passed on.
 */
import * as z from "zod";
import { isSecretKey, redactSecrets } from "../observability/redact-secrets";

/**
 * `rate_limit`, `auth` and `billing` are the provider errors model failover acts on (seed 004);
 * `canceled` is an aborted turn (a client's `cancel`), not a failure of the agent.
 */
export const AGENT_ERROR_CODES = ["rate_limit", "auth", "billing", "context_overflow", "output_length", "content_filter", "provider_error", "canceled", "agent_error"] as const;
export type AgentErrorCode = (typeof AGENT_ERROR_CODES)[number];

export interface AgentError {
  code: AgentErrorCode;
  /** Redacted, at most MAX_ERROR_MESSAGE characters. */
  message: string;
}

/** Why a turn (or one assistant message of it) ended, as `message.finalize` says it. */
export type FinishReason = "end_turn" | "error" | "canceled";

/** Codes whose failure another model may not have: try the next one in the chain. */
export const FAILOVER_CODES: ReadonlySet<AgentErrorCode> = new Set(["rate_limit", "auth", "billing"]);

export const MAX_ERROR_MESSAGE = 500;
/** Longest string kept of a tool's argument or result, per value. */
export const MAX_TOOL_TEXT = 2_000;

const OpenCodeError = z.object({
  name: z.string(),
  data: z
    .object({
      message: z.string().optional(),
      statusCode: z.number().optional(),
      responseBody: z.string().optional(),
    })
    .passthrough()
    .optional(),
});

const RATE_LIMIT = /rate.?limit|too many requests|\b429\b|overloaded/i;
const BILLING = /billing|insufficient.?quota|quota exceeded|exceeded your current quota|credit balance|payment required|insufficient.?(funds|credits?)/i;
const AUTH = /invalid.?api.?key|incorrect api key|unauthori[sz]ed|authentication|invalid x-api-key|permission denied/i;

function bounded(text: string, max: number): string {
  const redacted = redactSecrets(text);
  return redacted.length > max ? `${redacted.slice(0, max)}… [${redacted.length - max} more characters]` : redacted;
}

/** A provider failure classified from its status (preferred) or its wording. */
function classifyProvider(status: number | undefined, text: string): AgentErrorCode {
  if (status === 429) return "rate_limit";
  if (status === 401 || status === 403) return "auth";
  if (status === 402) return "billing";
  if (BILLING.test(text)) return "billing";
  if (RATE_LIMIT.test(text)) return "rate_limit";
  if (AUTH.test(text)) return "auth";
  return "provider_error";
}

/** OpenCode's error object (session.error / assistant message `error`); null for anything else. */
export function classifyAgentError(raw: unknown): AgentError | null {
  const parsed = OpenCodeError.safeParse(raw);
  if (!parsed.success) return null;
  const { name, data } = parsed.data;
  const text = data?.message ?? name;
  const message = bounded(text, MAX_ERROR_MESSAGE);
  switch (name) {
    case "MessageAbortedError":
      return { code: "canceled", message };
    case "ProviderAuthError":
      return { code: "auth", message };
    case "ContextOverflowError":
      return { code: "context_overflow", message };
    case "MessageOutputLengthError":
      return { code: "output_length", message: data?.message ? message : "the answer exceeded the model's output limit" };
    case "ContentFilterError":
      return { code: "content_filter", message };
    case "APIError":
      return { code: classifyProvider(data?.statusCode, `${text} ${data?.responseBody ?? ""}`), message };
    default:
      return { code: "agent_error", message };
  }
}

/** A `session.status` of type `retry` (OpenCode waits out a provider error): the error it retries, classified. */
export function classifyRetry(message: string | undefined): AgentError {
  const text = message ?? "the model provider asked to retry";
  return { code: classifyProvider(undefined, text), message: bounded(text, MAX_ERROR_MESSAGE) };
}

export function finishReasonOf(error: AgentError | null): FinishReason {
  if (!error) return "end_turn";
  return error.code === "canceled" ? "canceled" : "error";
}

/** A tool's argument or result as clients and the transcript get it: strings bounded and redacted, nesting bounded. */
export function clipToolValue(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return bounded(value, MAX_TOOL_TEXT);
  if (value === null || typeof value !== "object") return value;
  if (depth >= 4) return "[nested value omitted]";
  if (Array.isArray(value)) {
    const kept = value.slice(0, 50).map((v) => clipToolValue(v, depth + 1));
    return value.length > 50 ? [...kept, `[${value.length - 50} more items]`] : kept;
  }
  const out: Record<string, unknown> = {};
  // As the logger does: a string under a secret-named key is masked whole.
  for (const [k, v] of Object.entries(value).slice(0, 50)) out[k] = isSecretKey(k) && typeof v === "string" ? "[REDACTED]" : clipToolValue(v, depth + 1);
  return out;
}

export function clipToolText(text: string): string {
  return bounded(text, MAX_TOOL_TEXT);
}
