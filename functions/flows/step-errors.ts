/**
 * The error names flow steps throw, which the ASL files match in `Retry` and `Catch`.
 * Step Functions sees a Lambda error's `errorType` (the error's `name`), so every error a step
 * lets escape is renamed here to one of a small, stable vocabulary.
 */
import { AppError, InvalidTransitionError, LeaseBusyError, LeaseLostError, NotFoundError, ProviderError, StaleWriteError } from "../domain/errors";

export const STEP_ERRORS = {
  /** Another flow holds the session lease: retry with backoff. */
  leaseBusy: "LeaseBusy",
  /** This flow's lease was taken over: it must commit nothing and destroy nothing. */
  leaseLost: "LeaseLost",
  /** The session changed under the flow (CAS failed): same handling as a lost lease. */
  staleWrite: "StaleWrite",
  invalidTransition: "InvalidTransition",
  sessionNotFound: "SessionNotFound",
  /** A provider or agent failure worth retrying (network, 5xx, rate limit). */
  providerTransient: "ProviderTransient",
  /** A provider failure that retrying will not fix. */
  providerFailed: "ProviderFailed",
  /** An idle snapshot's last look found the session not idle (agent busy, sandbox alive): stand down, change nothing. */
  notIdle: "NotIdle",
  /** A memory snapshot could not be restored (seed 002 §5c): the snapshot id is cleared. */
  restoreFailed: "RestoreFailed",
} as const;

export class StepError extends Error {
  constructor(
    name: string,
    message: string,
    readonly original?: unknown,
  ) {
    super(message);
    this.name = name;
  }
}

/**
 * Provider operations whose permanent failure means the session's snapshot is unusable
 * (modal-provider `RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION`, e2b-provider `RESUME_SANDBOX_OPERATION`;
 * spelled out here so flow bundles do not import the provider SDKs).
 */
export const RESTORE_OPERATIONS: readonly string[] = ["restoreFromMemorySnapshot", "resumeSandbox"];

/** Maps any error to a `StepError` with a stable name; the message is already redacted by its origin. */
export function toStepError(err: unknown): StepError {
  if (err instanceof StepError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof LeaseBusyError) return new StepError(STEP_ERRORS.leaseBusy, message, err);
  if (err instanceof LeaseLostError) return new StepError(STEP_ERRORS.leaseLost, message, err);
  if (err instanceof StaleWriteError) return new StepError(STEP_ERRORS.staleWrite, message, err);
  if (err instanceof InvalidTransitionError) return new StepError(STEP_ERRORS.invalidTransition, message, err);
  if (err instanceof NotFoundError) return new StepError(STEP_ERRORS.sessionNotFound, message, err);
  if (err instanceof ProviderError) {
    if (!err.retryable && RESTORE_OPERATIONS.includes(err.operation)) return new StepError(STEP_ERRORS.restoreFailed, message, err);
    return new StepError(err.retryable ? STEP_ERRORS.providerTransient : STEP_ERRORS.providerFailed, message, err);
  }
  if (err instanceof AppError && "retryable" in err && typeof err.retryable === "boolean") {
    return new StepError(err.retryable ? STEP_ERRORS.providerTransient : STEP_ERRORS.providerFailed, message, err);
  }
  return new StepError(err instanceof Error && err.name !== "Error" ? err.name : "StepFailed", message, err);
}
