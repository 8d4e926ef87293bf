/**
 * Configuration: one module that parses `process.env` once (at cold start) and fails with a
 * message naming the variable (STYLE.md 4). Timing constants default to the seeds' values and
 * accept fractional seconds (tests use short values).
 */
import * as z from "zod";
import { PROVIDER_TYPES } from "../domain/session";
import { processEnvironment } from "./environment";

const seconds = (fallback: number) => z.coerce.number().positive().finite().default(fallback);

export const ConfigSchema = z.object({
  /** The single DynamoDB table. */
  TABLE_NAME: z.string().min(1),
  /** Set for dynalite / DynamoDB Local only. */
  DYNAMODB_ENDPOINT: z.url().optional(),
  /** The WebSocket URL clients connect to (`GET /v1/health` tells it); empty until the WebSocket API exists. */
  WS_URL: z.string().default(""),
  DEFAULT_SANDBOX_PROVIDER: z.enum(PROVIDER_TYPES).default("local"),
  /** Where the `local` provider keeps sandboxes when a Lambda entry builds it (the deploy rehearsal only; never set in AWS). */
  LOCAL_SANDBOX_DIR: z.string().min(1).optional(),
  /** Providers sessions may ask for (comma separated); defaults to the default provider alone. */
  SANDBOX_PROVIDERS: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const list = (v ?? "").split(",").map((s) => s.trim()).filter(Boolean);
      for (const p of list) {
        if (!(PROVIDER_TYPES as readonly string[]).includes(p)) {
          ctx.addIssue({ code: "custom", message: `unknown provider "${p}" (known: ${PROVIDER_TYPES.join(", ")})` });
          return z.NEVER;
        }
      }
      return list as (typeof PROVIDER_TYPES)[number][];
    }),
  /** Web client idle grace (seed 002). */
  IDLE_SNAPSHOT_DELAY_SECONDS: seconds(300),
  /** Automation and Slack idle grace (seed 002). */
  AUTOMATION_IDLE_GRACE_SECONDS: seconds(30),
  /** API.md "Automations": the shortest interval a schedule may fire at (under 60 the local runtime accepts `rate(<n> seconds)`). */
  AUTOMATION_MIN_INTERVAL_SECONDS: seconds(300),
  SANDBOX_TIMEOUT_SECONDS: seconds(3600),
  EXPIRY_MIGRATION_LEAD_SECONDS: seconds(300),
  /** Orphan sweeper period (seed 002 §11): the backstop behind event-driven idle checks. */
  SWEEPER_INTERVAL_SECONDS: seconds(600),
  /** After a failed idle snapshot the session stays running; the next check comes this much later (seed 002 "retry on the next idle check"). */
  IDLE_SNAPSHOT_RETRY_SECONDS: seconds(30),
  /** Consecutive failed idle snapshots before the circuit breaker stops the session (seed 002 verification 19). */
  IDLE_SNAPSHOT_MAX_FAILURES: z.coerce.number().int().positive().default(3),
  /** A proxy connection (terminal / editor WebSocket) that is not refreshed within this long no longer counts as present. */
  PROXY_CONNECTION_TTL_SECONDS: seconds(120),
  /**
   * A WebSocket client connection that shows no activity for this long no longer counts as
   * connected (issue 14 §3). Above API Gateway's 10-minute idle timeout, which closes a
   * connection whose client sends nothing: clients send `ping` or `heartbeat` meanwhile.
   */
  CONNECTION_TTL_SECONDS: seconds(900),
  /**
   * Local runtime only: the local WebSocket server pings every client this often; one that
   * leaves two pings in a row unanswered is dropped (a half-open peer), and an answer keeps the
   * connection's expiry fresh. API Gateway detects dead peers itself.
   */
  LOCAL_WS_PING_SECONDS: seconds(30),
  /** An idle-check schedule may fire this early (EventBridge Scheduler has one-minute precision); its target waits for the exact time. */
  IDLE_CHECK_MAX_EARLY_SECONDS: seconds(70),
  /** The sweeper terminates an unreferenced sandbox only when it is older than this (a flow may be about to commit it). */
  ORPHAN_SANDBOX_MIN_AGE_SECONDS: z.coerce.number().nonnegative().finite().default(600),
  /** Session lease TTL; must cover the worst-case snapshot (seed 002 constraint 6). */
  LEASE_TTL_SECONDS: seconds(300),
  /** Expiry migration: how long to wait for the agent's in-flight turn before aborting it (seed 000 §6). */
  MIGRATION_TURN_WAIT_SECONDS: seconds(30),
  /** Streaming relay: its heartbeat's TTL, so how long a dead relay's sessions wait for a successor. */
  RELAY_LEASE_TTL_SECONDS: seconds(30),
  /**
   * Streaming relay: the backstop scan for running sessions nobody watches (issue 15: flows nudge
   * the relay when a session starts running, and a dead peer's heartbeat triggers a scan at once).
   */
  RELAY_SCAN_INTERVAL_SECONDS: seconds(60),
  /** Default lifetime of a sidecar access token (POST /v1/sessions/{id}/sidecar-access); callers may ask for 60-3600 s. */
  SIDECAR_ACCESS_TTL_SECONDS: z.coerce.number().int().min(60).max(3600).default(900),
  /**
   * The control plane's public base URL as sandboxes reach it: their sidecars ask
   * `POST <url>/v1/sandbox/git-credential` and `/env-values` for the session's credentials. In AWS
   * the HTTP API's URL (set by the stack); locally the runtime's own URL. Unset: sandboxes get none.
   */
  CONTROL_PLANE_URL: z.url().optional(),
  /** seed 003 §6.7: `git pull --ff-only` in each repo when a sandbox is restored from a snapshot. */
  SANDBOX_GIT_PULL_ON_RESTORE: z
    .enum(["true", "false", "1", "0", ""])
    .default("false")
    .transform((v) => v === "true" || v === "1"),
  /** Minimum seconds between freshness pulls; 0 pulls on every restore. */
  SANDBOX_GIT_PULL_CADENCE_SECONDS: z.coerce.number().nonnegative().finite().default(0),
  /** Largest accepted HTTP request body. */
  MAX_BODY_BYTES: z.coerce.number().int().positive().default(64 * 1024),
  /** Slack (API.md "Slack"): the app's signing secret and bot token (locally; in AWS the SLACK_SECRET_ARN secret holds them). Never logged. */
  SLACK_SIGNING_SECRET: z.string().min(1).optional(),
  SLACK_BOT_TOKEN: z.string().min(1).optional(),
  /** Base URL of Slack's Web API (a test points it at a local server). */
  SLACK_API_URL: z.url().default("https://slack.com/api/"),
  /** The Slack delivery queue (SQS): the flow steps that broadcast statuses forward them there (slack/status-forward.ts). */
  SLACK_QUEUE_URL: z.url().optional(),
  /**
   * Deployment-wide safety cap (issue 14 §7): sessions one org may have open (any status but
   * `stopped`; paused sessions keep snapshots and can resume at any time). Creating one more is a
   * 429 `quota_exceeded`. Not API.md's per-org `maxRunningSessions` (usage limits), which is separate.
   */
  ORG_MAX_OPEN_SESSIONS: z.coerce.number().int().positive().default(100),
  /**
   * Usage metering (API.md "Usage, limits and credits"): how often running sessions' usage is
   * written and the org's credit limit enforced (an EventBridge Scheduler rate in AWS, whole
   * minutes; a timer locally, fractional allowed).
   */
  METERING_INTERVAL_SECONDS: seconds(60),
  /** Safety cap: prompts one session may hold queued (not yet sent to the agent); one more is a 429 `quota_exceeded`. */
  MAX_QUEUED_PROMPTS_PER_SESSION: z.coerce.number().int().positive().default(50),
  /** Snapshot builder (API.md "Repositories and prebuilds"): the longest one setup command may run. */
  BUILD_COMMAND_TIMEOUT_SECONDS: seconds(1800),
  /** Snapshot builder: a service command must still run (or have exited 0) this long after it started. */
  BUILD_SERVICE_VERIFY_SECONDS: seconds(5),
  /** Scheduled rebuild: a prebuild whose latest build started this long ago is built again; 0 turns the schedule off. */
  PREBUILD_REBUILD_INTERVAL_SECONDS: z.coerce.number().nonnegative().finite().default(86_400),
  /** Logger and metrics `service` (Powertools' own variable; the stack sets it per function family). */
  POWERTOOLS_SERVICE_NAME: z.string().min(1).default("sandbox-control-plane"),
  /** CloudWatch namespace of the EMF metrics (the stack's alarms read it). */
  POWERTOOLS_METRICS_NAMESPACE: z.string().min(1).default("SandboxControlPlane"),
  /** The WebSocket API's management endpoint (AWS); without it there is nobody to push to. */
  WS_MANAGEMENT_ENDPOINT: z.url().optional(),
  /** The send-init function the WebSocket `$connect` handler invokes asynchronously (AWS). */
  SEND_INIT_FUNCTION_NAME: z.string().min(1).optional(),
});
export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export function parseConfig(env: Record<string, string | undefined>): Config {
  const result = ConfigSchema.safeParse(env);
  if (!result.success) {
    const issues = result.error.issues.map((i) => `${i.path.join(".") || "(env)"}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${issues.join("; ")}`);
  }
  const config = result.data;
  const providers = config.SANDBOX_PROVIDERS.length ? config.SANDBOX_PROVIDERS : [config.DEFAULT_SANDBOX_PROVIDER];
  if (!providers.includes(config.DEFAULT_SANDBOX_PROVIDER)) {
    throw new ConfigError(`invalid configuration: DEFAULT_SANDBOX_PROVIDER "${config.DEFAULT_SANDBOX_PROVIDER}" is not in SANDBOX_PROVIDERS`);
  }
  return { ...config, SANDBOX_PROVIDERS: providers };
}

let cached: Config | undefined;

/**
 * The process's environment: the one place outside tests that reads `process.env`. Adapters that
 * take their own variables from it (state machine ARNs, schedule targets, the secrets' ARNs, the
 * provider credentials) get this record from the composition root, never `process.env` itself.
 */
export { processEnvironment };

/** The process's configuration, parsed on first use. */
export function loadConfig(): Config {
  cached ??= parseConfig(processEnvironment());
  return cached;
}
