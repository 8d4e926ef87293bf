/**
 * The session model (API.md "Session object"): zod schemas for the stored record and the
 * client-facing view, and the two status vocabularies.
 */
import { posix } from "node:path";
import * as z from "zod";
import { EnvFileSchema, type EnvSpec } from "../../sandbox/shared/env-file-schema";
import { NotAFileError, OutsideWorkspaceError, resolveInsideWorkspaceLexically, splitFilePath } from "../../sandbox/shared/workspace-path";
import { AgentModel, GitIdentity, ModelId, SecretName, ServiceCommand } from "./agent-settings";
import { workspacePathTextProblem } from "./text";
import { resolveRestoreSource, type RestoreSource } from "./restore-source";

/** Stored statuses (ARCHITECTURE.md §4). `starting` means a record with no sandbox yet. */
export const SESSION_STATUSES = ["starting", "running", "paused", "stopped", "error"] as const;
export const SessionStatus = z.enum(SESSION_STATUSES);
export type SessionStatus = z.infer<typeof SessionStatus>;

/** Client-facing statuses sent in WebSocket `status` messages (seed 000 StatusMessage). */
export const CLIENT_STATUSES = ["creating", "resuming", "running", "paused", "stopped", "error", "migrating"] as const;
export const ClientStatus = z.enum(CLIENT_STATUSES);
export type ClientStatus = z.infer<typeof ClientStatus>;

export const CLIENT_TYPES = ["web", "cli", "slack", "automation"] as const;
export const ClientType = z.enum(CLIENT_TYPES);
export type ClientType = z.infer<typeof ClientType>;

export const SESSION_TYPES = ["coding", "setup", "terminal"] as const;
export const SessionType = z.enum(SESSION_TYPES);
export type SessionType = z.infer<typeof SessionType>;

export const PROVIDER_TYPES = ["local", "modal", "e2b"] as const;
export const ProviderType = z.enum(PROVIDER_TYPES);
export type ProviderType = z.infer<typeof ProviderType>;

/**
 * What answers the agent's permission requests (OpenCode `permission.asked`, issue 25 §3):
 * `auto` approves each one (the sandbox is the boundary, as seed 004's headless agent does);
 * `ask` puts the question to the session's clients (`permission.asked` frame) and waits for one
 * of them to answer (`permission.reply`).
 */
export const PERMISSION_POLICIES = ["auto", "ask"] as const;
export const PermissionPolicy = z.enum(PERMISSION_POLICIES);
export type PermissionPolicy = z.infer<typeof PermissionPolicy>;

/** At most this many fallback models after the session's own (seed 004 model failover). */
export const MAX_FALLBACK_MODELS = 5;

/** Why a session is paused. Open vocabulary: the known reasons plus provider-specific ones. */
export const PauseReason = z.union([
  z.enum(["inactivity", "user", "orphaned", "sandbox_lost", "credit_limit", "restore_failed", "migration_failed"]),
  z.string().min(1).max(64),
]);
export type PauseReason = z.infer<typeof PauseReason>;

/** Session ids are opaque to clients; this is the shape we mint and accept at the edge. */
export const SessionId = z.string().regex(/^ses_[0-9a-z]{26}$/, "must be a session id (ses_ followed by 26 characters)");
export type SessionId = z.infer<typeof SessionId>;

const IsoTime = z.iso.datetime();

export const RepoSpec = z
  .object({
    url: z.string().min(1).max(2048),
    branch: z.string().min(1).max(255).optional(),
    workspacePath: z.string().min(1).max(255).optional(),
    /** A commit or tag checked out after the clone (seed 004 `REPO_REF`). */
    ref: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$/, "must be a commit, tag or branch name").optional(),
    /** Shallow clone depth; the default is the whole history (the agent needs log, blame, rebase). */
    depth: z.number().int().positive().max(1_000_000).optional(),
    /** The org secret sent as the password (user `x-access-token`) for http(s) git (API.md "Secrets"). */
    credential: SecretName.optional(),
    /** The stored repository (`/v1/repos`) this spec came from, when the session named one by id. */
    repoId: z.string().min(1).max(64).optional(),
  })
  .strict();
export type RepoSpec = z.infer<typeof RepoSpec>;

/** At most this many env files per session (each is one `env apply` target). */
export const MAX_ENV_FILES = 50;
/** At most this many keys per env file, and this long a key name. */
export const MAX_ENV_FILE_KEYS = 200;
export const MAX_ENV_KEY_NAME_CHARS = 128;

/** Any absolute root: the API judges workspace-relative paths lexically, the way the boot does. */
export const API_WORKSPACE_ROOT = "/workspace";

/**
 * Why an env file's path cannot be accepted, or null: the text rule (functions/domain/text.ts),
 * then the checks `env apply` itself makes before writing (it names a file, relative, inside
 * the workspace), with the very functions it uses (sandbox/shared/workspace-path.ts).
 */
export function envFilePathProblem(path: string): string | null {
  const text = workspacePathTextProblem(path);
  if (text) return text;
  if (posix.isAbsolute(path)) return "must be relative to the workspace (its absolute path differs per provider)";
  try {
    splitFilePath(path);
    resolveInsideWorkspaceLexically(API_WORKSPACE_ROOT, path);
  } catch (err) {
    if (err instanceof NotAFileError) return "must name a file (not \".\", \"..\" or a directory ending in \"/\")";
    if (err instanceof OutsideWorkspaceError) return "must stay inside the workspace";
    throw err;
  }
  return null;
}

/**
 * The env files a session's sandbox generates at boot (`sandbox env apply`, seed 003 §6.11): the
 * in-sandbox CLI's own file schema (sandbox/shared/env-file-schema.ts), so whatever the control plane
 * accepts the CLI accepts. On top of it, what a session may ask for:
 * - keys only, never a `value`: the session record is returned to every client of the session
 *   and the boot spec carries no secrets, so values reach the sandbox through its environment
 *   or its values file (`ENV_VALUES_FILE`), never through the session;
 * - paths relative to the workspace (its absolute path differs per provider) that stay inside it;
 * - each path once (the CLI would refuse the whole spec).
 */
export const SessionEnvFiles = z
  .array(EnvFileSchema)
  .max(MAX_ENV_FILES)
  .superRefine((files, ctx) => {
    const seen = new Set<string>();
    files.forEach((file, i) => {
      const pathProblem = envFilePathProblem(file.path);
      if (pathProblem) {
        ctx.addIssue({ code: "custom", path: [i, "path"], message: pathProblem });
        return;
      }
      const normalized = posix.normalize(file.path);
      if (seen.has(normalized)) ctx.addIssue({ code: "custom", path: [i, "path"], message: `"${file.path}" is listed more than once` });
      seen.add(normalized);
      if (file.keys.length > MAX_ENV_FILE_KEYS) {
        ctx.addIssue({ code: "custom", path: [i, "keys"], message: `must list at most ${MAX_ENV_FILE_KEYS} keys` });
      }
      file.keys.forEach((key, j) => {
        if (key.name.length > MAX_ENV_KEY_NAME_CHARS) {
          ctx.addIssue({ code: "custom", path: [i, "keys", j, "name"], message: `must be at most ${MAX_ENV_KEY_NAME_CHARS} characters` });
        }
        if (key.value !== undefined) {
          ctx.addIssue({
            code: "custom",
            path: [i, "keys", j, "value"],
            message: "values are not accepted: a session stores key names only (values reach the sandbox through its environment or values file)",
          });
        }
      });
    });
  });
export type SessionEnvFiles = EnvSpec;

/** The stored session item's domain fields (the DynamoDB key attributes live in the store). */
export const SessionRecord = z.object({
  id: SessionId,
  orgId: z.string().min(1),
  userId: z.string().min(1),
  title: z.string().nullable(),
  status: SessionStatus,
  clientType: ClientType,
  sessionType: SessionType,
  provider: ProviderType,
  repos: z.array(RepoSpec),
  /** Env files the sandbox generates at boot (SessionEnvFiles); `[]` for records written before they existed. */
  envFiles: z.array(EnvFileSchema).default([]),
  /** The model (and the secret holding its key) for this session; null: the org's, else the deployment default. */
  model: AgentModel.nullable().default(null),
  /**
   * Seed 004 model failover: when a turn fails with a rate-limit, auth or billing error, it is
   * sent again on the next of these (`provider/model`; their provider's key must reach the
   * sandbox like the main model's: the deployment's, or the same provider's). `[]`: no failover.
   */
  fallbackModels: z.array(ModelId).default([]),
  /** The org secret holding the key of each fallback that named one (by model id); the others use the chain's or the deployment's key. */
  fallbackKeySecrets: z.record(z.string(), SecretName).default({}),
  permissionPolicy: PermissionPolicy.default("auto"),
  /** Written to the agent's `instructions.md` at every boot. */
  systemPrompt: z.string().nullable().default(null),
  /** Started by the sidecar at every boot (seed 000 "service auto-start"). */
  serviceCommands: z.array(ServiceCommand).default([]),
  /** Appended to the sandbox's `authorized_keys` when the session asks for SSH. */
  sshPublicKey: z.string().nullable().default(null),
  /** What started an automation run, written to `.proliferate/trigger-context.json` for the agent. */
  triggerContext: z.record(z.string(), z.unknown()).nullable().default(null),
  /** The git author of the agent's commits (the session's user); null for records written before it existed. */
  gitIdentity: GitIdentity.nullable().default(null),
  prebuildId: z.string().nullable(),
  /**
   * Which snapshot layer the current sandbox started from (seed 003 §6.5: session, prebuild,
   * repo, base or none), set by each provision; null before the first.
   */
  snapshotLayer: z.enum(["session", "prebuild", "repo", "base", "none"]).nullable().default(null),
  initialPrompt: z.string().nullable(),
  sandboxId: z.string().nullable(),
  snapshotId: z.string().nullable(),
  /** When `snapshotId` stops being restorable (a Modal memory snapshot: 7 days after it was taken); null: kept until deleted. */
  snapshotExpiresAt: IsoTime.nullable().default(null),
  /**
   * The durable filesystem snapshot taken together with an expiring `snapshotId` (issue 22 §3):
   * a resume restores it once `snapshotId` has expired (domain/restore-source.ts).
   */
  durableSnapshotId: z.string().nullable().default(null),
  /** When `durableSnapshotId` expires (MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS); null: kept until deleted. */
  durableSnapshotExpiresAt: IsoTime.nullable().default(null),
  pauseReason: PauseReason.nullable(),
  stopReason: z.string().nullable(),
  errorMessage: z.string().nullable(),
  createdAt: IsoTime,
  updatedAt: IsoTime,
  pausedAt: IsoTime.nullable(),
  endedAt: IsoTime.nullable(),
  lastActivityAt: IsoTime,
  sandboxExpiresAt: IsoTime.nullable(),
  /**
   * The OpenCode API base URL of the current sandbox (a provider tunnel). Internal: tunnel URLs
   * grant access to the agent, so the client view never includes it.
   */
  openCodeUrl: z.string().nullable().default(null),
  /**
   * The current sandbox's preview proxy (the ports it exposes: seed 003 §4 port 20000 behind
   * Caddy), when its provider gives one. Clients see it as `preview` while the session runs.
   */
  previewUrl: z.string().nullable().default(null),
  /** The OpenCode session inside the sandbox (verified or recreated on every resume). */
  codingAgentSessionId: z.string().nullable(),
  /**
   * The key epoch of the current sandbox's sandbox key (sandbox/shared/access-token.ts): moves on
   * with each freshly booted sandbox, so a leaked key stops working once its sandbox is replaced.
   * Internal. Absent (a session stored before epochs): 0, the v1 key.
   */
  sandboxKeyEpoch: z.number().int().nonnegative().optional(),
  /**
   * How many times a client connected (`$connect` adds one in its activity write, after it
   * registered the connection). Internal: a flow that listed the connections compares it across
   * its run, and while it has not moved its listing still holds every connection (issue 15).
   */
  clientConnects: z.number().int().nonnegative().optional(),
  /**
   * How many prompts were queued for the session: set at create (1 with an initial prompt, else 0)
   * and added to by the prompt route's activity write, made after it stores the prompt. Internal.
   * 0: the session never had a prompt, so a flow's Finish has no queue to look at (issue 15).
   * Absent (a session stored before the count): unknown, Finish looks.
   */
  promptsEnqueued: z.number().int().nonnegative().optional(),
  /** The agent's last known state, written by the relay on busy/idle transitions (seed 002 c.9, c.10). */
  agentBusy: z.boolean().default(false),
  /** When the relay last saw the agent go from busy to idle; null while unknown (fresh sandbox). */
  lastKnownAgentIdleAt: IsoTime.nullable().default(null),
  /** Idle snapshots that failed in a row; the circuit breaker stops the session at the limit (seed 002 verification 19). */
  idleSnapshotFailures: z.number().int().nonnegative().default(0),
  /** Start of the current `running` period; active seconds are added when it ends. */
  runningSince: IsoTime.nullable(),
  activeSeconds: z.number().nonnegative(),
  /** Optimistic-concurrency counter: every lifecycle write checks and increments it. */
  version: z.number().int().positive(),
  /**
   * When a resume was last asked for while the session ran (`SessionStore.requestResume`, issue
   * 25 §1). Internal, never in the view: a pausing flow's commit returns it, so waking whoever
   * asked reads nothing (issue 15).
   */
  resumeRequestedAt: IsoTime.optional(),
});
export type SessionRecord = z.infer<typeof SessionRecord>;

/**
* What clients see (API.md): the record without tenancy and concurrency internals, plus
 * `restoreFrom`: the snapshot a resume at `now` restores (null: a fresh sandbox), with the one
 * after it once it expires (domain/restore-source.ts), and the sandbox's preview URL as
 * `preview` (only while it runs; never the agent's tunnel).
 */
export type SessionView = Omit<SessionRecord, "orgId" | "version" | "runningSince" | "initialPrompt" | "openCodeUrl" | "sandboxKeyEpoch" | "resumeRequestedAt" | "previewUrl" | "clientConnects" | "promptsEnqueued"> & {
  restoreFrom: RestoreSource | null;
  preview: { url: string } | null;
};

/** A session's preview as its clients see it (the view, and the `running` status frame): only while it runs. */
export function sessionPreview(record: Pick<SessionRecord, "status" | "previewUrl">): SessionView["preview"] {
  return record.status === "running" && record.previewUrl ? { url: record.previewUrl } : null;
}

export function toSessionView(record: SessionRecord, now: Date): SessionView {
  const { orgId: _org, version: _v, runningSince: _r, initialPrompt: _p, openCodeUrl: _u, sandboxKeyEpoch: _k, resumeRequestedAt: _rr, clientConnects: _cc, promptsEnqueued: _pe, previewUrl: _pu, ...view } = record;
  return { ...view, restoreFrom: resolveRestoreSource(record, now), preview: sessionPreview(record) };
}

export interface NewSessionInput {
  id: SessionId;
  orgId: string;
  userId: string;
  title?: string | undefined;
  clientType?: ClientType | undefined;
  sessionType?: SessionType | undefined;
  provider: ProviderType;
  repos?: RepoSpec[] | undefined;
  envFiles?: SessionEnvFiles | undefined;
  model?: AgentModel | undefined;
  fallbackModels?: string[] | undefined;
  fallbackKeySecrets?: Record<string, string> | undefined;
  permissionPolicy?: PermissionPolicy | undefined;
  systemPrompt?: string | undefined;
  serviceCommands?: ServiceCommand[] | undefined;
  sshPublicKey?: string | undefined;
  triggerContext?: Record<string, unknown> | undefined;
  gitIdentity?: GitIdentity | undefined;
  prebuildId?: string | undefined;
  initialPrompt?: string | undefined;
  now: Date;
}

/** A new session record: `starting`, no sandbox (seed 000 §1: no sandbox is created here). */
export function newSessionRecord(input: NewSessionInput): SessionRecord {
  const now = input.now.toISOString();
  return {
    id: input.id,
    orgId: input.orgId,
    userId: input.userId,
    title: input.title ?? null,
    status: "starting",
    clientType: input.clientType ?? "web",
    sessionType: input.sessionType ?? "coding",
    provider: input.provider,
    repos: input.repos ?? [],
    envFiles: input.envFiles ?? [],
    model: input.model ?? null,
    fallbackModels: input.fallbackModels ?? [],
    fallbackKeySecrets: input.fallbackKeySecrets ?? {},
    permissionPolicy: input.permissionPolicy ?? "auto",
    systemPrompt: input.systemPrompt ?? null,
    serviceCommands: input.serviceCommands ?? [],
    sshPublicKey: input.sshPublicKey ?? null,
    triggerContext: input.triggerContext ?? null,
    gitIdentity: input.gitIdentity ?? null,
    prebuildId: input.prebuildId ?? null,
    snapshotLayer: null,
    initialPrompt: input.initialPrompt ?? null,
    promptsEnqueued: input.initialPrompt ? 1 : 0,
    sandboxId: null,
    snapshotId: null,
    snapshotExpiresAt: null,
    durableSnapshotId: null,
    durableSnapshotExpiresAt: null,
    pauseReason: null,
    stopReason: null,
    errorMessage: null,
    createdAt: now,
    updatedAt: now,
    pausedAt: null,
    endedAt: null,
    lastActivityAt: now,
    sandboxExpiresAt: null,
    openCodeUrl: null,
    previewUrl: null,
    codingAgentSessionId: null,
    agentBusy: false,
    lastKnownAgentIdleAt: null,
    idleSnapshotFailures: 0,
    runningSince: null,
    activeSeconds: 0,
    version: 1,
  };
}
