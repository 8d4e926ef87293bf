/**
 * One mapping from an SDK failure to `ProviderError` for the cloud providers (seed 003 §5
 * "Error Handling": every provider failure is wrapped and redacted before it is stored or logged).
 * Each provider supplies a classifier that knows its SDK's error classes; everything else
 * (redaction, retryable flag, the sanitised cause) lives here once.
 */
import { ProviderError } from "../domain/errors";
import { redactSecrets } from "../observability/redact-secrets";

/**
 * What kind of failure an SDK error is. `not_found` lets idempotent operations (terminate)
 * succeed; `auth` is never retried (a bad token stays bad); `transient` is retryable.
 */
export type ProviderFailureKind = "not_found" | "auth" | "transient" | "already_exists" | "other";

export type ProviderErrorClassifier = (err: unknown) => ProviderFailureKind;

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/**
 * The cause kept on the ProviderError is a redacted copy: SDK errors can echo request headers
 * or URLs with tokens, and the cause is logged alongside the error.
 */
function redactedCause(err: unknown): Error {
  const copy = new Error(redactSecrets(messageOf(err)));
  copy.name = err instanceof Error ? err.name : "Error";
  if (err instanceof Error && err.stack) copy.stack = redactSecrets(err.stack);
  return copy;
}

export function toProviderError(
  provider: string,
  operation: string,
  err: unknown,
  classify: ProviderErrorClassifier,
  prefix?: string,
): ProviderError {
  if (err instanceof ProviderError) return err;
  const kind = classify(err);
  const message = redactSecrets(prefix ? `${prefix}: ${messageOf(err)}` : messageOf(err));
  return new ProviderError(provider, operation, message, {
    cause: redactedCause(err),
    retryable: kind === "transient",
    context: { kind },
  });
}

/** The failure kind recorded on a ProviderError built by `toProviderError`. */
export function failureKindOf(err: unknown): ProviderFailureKind | null {
  if (!(err instanceof ProviderError)) return null;
  const kind = err.context.kind;
  return typeof kind === "string" ? (kind as ProviderFailureKind) : null;
}
