/**
 * Structured JSON logs (Powertools Logger) with request and session ids. Every value is passed
 * through the secret redactor before it is serialised, so secrets never reach a log line.
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { AppError } from "../domain/errors";
import { isSecretKey, redactSecrets } from "./redact-secrets";

/** Exported for tests: the replacer the logger uses. */
export function redactingReplacer(key: string, value: unknown): unknown {
  if (typeof value !== "string") return value;
  // Numbers under secret-looking names (token counts) stay: only string values can be secrets.
  return key && isSecretKey(key) ? "[REDACTED]" : redactSecrets(value);
}

/** A logger for `serviceName` (the composition root passes the configured POWERTOOLS_SERVICE_NAME). */
export function createLogger(serviceName = "sandbox-control-plane"): Logger {
  return new Logger({ serviceName, jsonReplacerFn: redactingReplacer });
}

/**
 * A log-safe view of an error: name, code, message and context, plus the cause's name and
 * message. Never the raw SDK error (its `$response` can carry request headers).
 */
export function errorForLog(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? { name: err.cause.name, message: redactSecrets(err.cause.message) } : undefined;
    return {
      name: err.name,
      message: redactSecrets(err.message),
      ...(err instanceof AppError ? { code: err.code, status: err.status, context: err.context } : {}),
      ...(cause ? { cause } : {}),
      stack: err.stack ? redactSecrets(err.stack.split("\n").slice(0, 8).join("\n")) : undefined,
    };
  }
  return { message: redactSecrets(String(err)) };
}
