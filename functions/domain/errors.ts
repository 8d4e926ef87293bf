/**
 * The one error hierarchy (STYLE.md 6). Every error the system raises on purpose extends
 * `AppError`: it keeps `cause`, carries context fields, and says whether its message may be
 * shown to a client. At the HTTP/WebSocket edge only client errors (4xx, `expose: true`) show
 * their message; everything else becomes a generic 500 with a request id.
 */
export type ErrorContext = Record<string, string | number | boolean | null | undefined>;

export abstract class AppError extends Error {
  abstract readonly status: number;
  abstract readonly code: string;
  readonly context: ErrorContext;

  constructor(message: string, options: { cause?: unknown; context?: ErrorContext } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.context = options.context ?? {};
  }

  /** Client errors (4xx) expose their message; server errors never do. */
  get expose(): boolean {
    return this.status < 500;
  }
}

/** 400: the request is malformed; the message names the field. */
export class ValidationError extends AppError {
  readonly status = 400;
  constructor(
    message: string,
    readonly code: string = "invalid_request",
    options: { cause?: unknown; context?: ErrorContext } = {},
  ) {
    super(message, options);
  }
}

/** 401: no token, or a token that resolves to nobody. */
export class UnauthorizedError extends AppError {
  readonly status = 401;
  readonly code = "unauthorized";
}

/** 403: the resource exists but belongs to another org. */
export class ForbiddenError extends AppError {
  readonly status = 403;
  readonly code = "forbidden";
}

/**
 * A session setting that no longer resolves when a sandbox boots (its model key secret was
 * deleted): retrying will not fix it, so the flow fails at once with this message.
 */
export class SessionSettingsError extends AppError {
  readonly status = 409;
  readonly code = "session_settings";
  readonly retryable = false;
}

/** 404: unknown id. */
export class NotFoundError extends AppError {
  readonly status = 404;
  readonly code = "not_found";
}

/** 409: the request is not allowed in the resource's current state (message names the state). */
export class ConflictError extends AppError {
  readonly status: number = 409;
  readonly code: string = "conflict";
}

/** 409: a status change the transition table does not allow from the current status. */
export class InvalidTransitionError extends ConflictError {
  override readonly code = "invalid_state";
  constructor(
    readonly from: string,
    readonly to: string,
    options: { cause?: unknown; context?: ErrorContext } = {},
  ) {
    super(`session is ${from}: cannot move to ${to}`, {
      ...options,
      context: { ...options.context, from, to },
    });
  }
}

/**
 * 409: a conditional write lost a race: the item's version (or fence, or sandbox) is no longer
 * the one the writer read. The write affected 0 items.
 */
export class StaleWriteError extends ConflictError {
  override readonly code = "stale_write";
}

/** 409: the session's lease is held by another live owner; the caller retries with backoff. */
export class LeaseBusyError extends ConflictError {
  override readonly code = "lease_busy";
}

/**
 * The caller's lease is no longer its own (expired and taken over, or released): it must not
 * perform destructive steps or commit (seed 002 verification 17).
 */
export class LeaseLostError extends ConflictError {
  override readonly code = "lease_lost";
}

/** 413: request body over the limit. */
export class PayloadTooLargeError extends AppError {
  readonly status = 413;
  readonly code = "payload_too_large";
}

/** 429: throttled or over quota. */
export class ThrottledError extends AppError {
  readonly status = 429;
  readonly code = "throttled";
}

/** 429: a deployment safety cap is reached (open sessions per org, queued prompts per session); the message names the limit and its value. */
export class QuotaExceededError extends AppError {
  readonly status = 429;
  readonly code = "quota_exceeded";
}

/**
 * 402: the org's `monthlyActiveSeconds` is spent (API.md "Usage, limits and credits"): creating,
 * resuming or waking a session is refused until the limit is raised or the month turns. A prompt
 * that met it is still stored and runs when the session can run again.
 */
export class CreditsExhaustedError extends AppError {
  readonly status = 402;
  readonly code = "credits_exhausted";
}

/** 500: an invariant the code relies on does not hold. Never exposed. */
export class InternalError extends AppError {
  readonly status = 500;
  readonly code = "internal_error";
}

/** 502: a sandbox provider operation failed. Message is redacted before it is built. */
export class ProviderError extends AppError {
  readonly status = 502;
  readonly code: string = "provider_error";
  constructor(
    readonly provider: string,
    readonly operation: string,
    message: string,
    options: { cause?: unknown; context?: ErrorContext; retryable?: boolean } = {},
  ) {
    super(`${provider} ${operation} failed: ${message}`, {
      ...options,
      context: { ...options.context, provider, operation },
    });
    this.retryable = options.retryable ?? false;
  }
  readonly retryable: boolean;
}

/**
 * 502: the coding agent (OpenCode in the sandbox) could not be reached or refused a request.
 * `retryable`: network errors, timeouts and 5xx are (the sandbox may be booting or busy);
 * 4xx are not (the same request would be refused again). The message never holds the base URL.
 */
export class AgentUnavailableError extends AppError {
  readonly status = 502;
  readonly code = "agent_unavailable";
  readonly retryable: boolean;
  constructor(message: string, options: { cause?: unknown; context?: ErrorContext; retryable?: boolean } = {}) {
    super(message, options);
    this.retryable = options.retryable ?? false;
  }
}
