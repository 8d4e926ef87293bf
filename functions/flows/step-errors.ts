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
  /**
   * Begin found nothing to do under the lease (issue 15: no Choice state after Begin). Not a
   * failure: the ASL catches it straight to Finish, its result carried in the error (`CarryError`).
   */
  nothingToDo: "NothingToDo",
  /** Commit's write landed but the finish it runs in the same invocation did not complete: Finish (retried) completes it. */
  finishIncomplete: "FinishIncomplete",
  /**
   * ensure-runtime's Provision commits in process (issue 15); when that commit did not land
   * (superseded, or failed) the step has already discarded the sandbox it created: the document
   * (`provision`, `superseded` or `failure`, `discarded`) is carried to Finish.
   */
  discarded: "Discarded",
} as const;

/**
 * A step that has done its work but must leave the normal path (Begin with nothing to do, a
 * Commit whose in-process finish failed) throws this: `flowStep` turns it into a `StepError`
 * named `name` whose message is the JSON of `carried` (plus the step's `ms`), and the ASL's
 * `Catch` (`ResultPath: "$.carried"`) hands it to Finish, where `FlowDocument` lifts it back into
 * the document. It saves a Choice state per flow (one billed state transition).
 */
export class CarryError extends Error {
  constructor(
    name: string,
    /** The step's result under its document key, e.g. `begin`. */
    readonly key: string,
    readonly carried: Record<string, unknown>,
    /** Other document keys to carry as they are (e.g. a Commit's in-process `terminate`). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(`${name}: ${key}`);
    this.name = name;
  }
}

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
