/**
 * Throttles and reserved concurrency (issue 14 §7). API Gateway throttles are per stage and per
 * route, not per tenant (HTTP APIs have no usage plans): they protect the table, the flows and
 * the providers from a burst, whoever sends it. Fairness between orgs is the per-org caps in the
 * handlers (ORG_MAX_OPEN_SESSIONS, MAX_QUEUED_PROMPTS_PER_SESSION).
 *
 * Per route, the expensive ones: each session create, resume or prompt can start a sandbox (a
 * flow, provider calls, money), secret writes and sandbox credential reads call KMS, sidecar
 * access resolves provider tunnels. Everything else gets the stage default.
 */
export interface Throttle {
  /** Steady-state requests per second. */
  rateLimit: number;
  /** Bucket size. */
  burstLimit: number;
}

/** Stage-wide default of the HTTP API and the WebSocket API (each route unless listed below). */
export const DEFAULT_STAGE_THROTTLE: Throttle = { rateLimit: 100, burstLimit: 200 };

/** HTTP routes by route id (functions/http/routes.ts) with a tighter throttle than the stage's. */
export const HTTP_ROUTE_THROTTLES: Readonly<Record<string, Throttle>> = {
  CreateSession: { rateLimit: 10, burstLimit: 20 },
  ResumeSession: { rateLimit: 10, burstLimit: 20 },
  PauseSession: { rateLimit: 10, burstLimit: 20 },
  SnapshotSession: { rateLimit: 10, burstLimit: 20 },
  StopSession: { rateLimit: 10, burstLimit: 20 },
  CreatePrompt: { rateLimit: 20, burstLimit: 40 },
  CreateSidecarAccess: { rateLimit: 10, burstLimit: 20 },
  PutSecret: { rateLimit: 5, burstLimit: 10 },
  PutOrgModel: { rateLimit: 5, burstLimit: 10 },
  SandboxGitCredential: { rateLimit: 20, burstLimit: 40 },
  SandboxEnvValues: { rateLimit: 20, burstLimit: 40 },
};

/**
 * WebSocket routes by route key: a connect provisions or resumes a sandbox. Frames (`$default`:
 * pings and heartbeats of every open client, and prompts, which the queued-prompt cap bounds)
 * keep the stage's throttle.
 */
export const WS_ROUTE_THROTTLES: Readonly<Record<string, Throttle>> = {
  $connect: { rateLimit: 10, burstLimit: 20 },
};

/**
 * Reserved concurrency by function id: a ceiling on how many copies run at once (and a floor the
 * rest of the account cannot take). Session creates are capped so the open-session count's
 * overshoot under a burst is bounded; prompts and resumes so a burst cannot start flows faster
 * than the table and the providers take them; the sweeper runs one sweep at a time. Flow steps
 * are left unreserved: Step Functions retries `Lambda.TooManyRequestsException`, but a reserved
 * step would slow every flow of every org. Off with the stack prop `reservedConcurrency: false`
 * (an account whose concurrency limit is still the new-account 10 cannot reserve any).
 */
export const RESERVED_CONCURRENCY: Readonly<Record<string, number>> = {
  CreateSession: 10,
  ResumeSession: 10,
  CreatePrompt: 20,
  Sweeper: 1,
  Metering: 1,
};
