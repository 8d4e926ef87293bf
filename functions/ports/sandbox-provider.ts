/**
 * Sandbox provider port (seed 003 §4, seed 000 "Provider Abstraction", seed 002 §2).
 * Implementations: `providers/local` (real processes, the default), `providers/modal`,
 * `providers/e2b`. Providers are stateless: everything they need comes in the call, and the
 * provider type is stored on the session so resume always uses the creator's provider.
 * Every failure is a `ProviderError` (domain/errors.ts) whose message is already redacted.
 */
import type { GitIdentity } from "../domain/agent-settings";
import type { GitFreshnessConfig } from "../domain/git-freshness";
import type { ProviderType, RepoSpec, SessionEnvFiles, SessionType } from "../domain/session";

export interface AgentConfig {
  /**
   * e.g. "anthropic/claude-sonnet-4-5" (its key is in `envVars` when the session or org named a
   * key secret). Unset: the deployment default, its own Anthropic key, else the development model.
   */
  modelId?: string;
  /**
   * The session's failover chain (seed 004): each of their providers needs its key too (in
   * `envVars` when a model of the chain named a key secret, else the deployment's own).
   */
  fallbackModelIds?: string[];
}

export interface ServiceCommand {
  name: string;
  command: string;
  cwd?: string;
}

export interface CreateSandboxOpts {
  sessionId: string;
  /** Always an array, even for a single repo; `[]` for a scratch session. */
  repos: RepoSpec[];
  /**
   * The sandbox's env vars. `SIDECAR_TOKEN` here is the sandbox key: providers hand it to the
   * boot as a 0600 file (never as an env var) and probe OpenCode with the password derived from it.
   */
  envVars: Record<string, string>;
  systemPrompt?: string;
  /** Restore from this snapshot (session, prebuild or repo layer); `mem:`-prefixed ids are memory snapshots. */
  snapshotId?: string | null;
  /** Base layer to start from when there is no restore snapshot. */
  baseSnapshotId?: string | null;
  agentConfig?: AgentConfig;
  /** The sandbox the session last referenced: `ensureSandbox` recovers it if it is still alive. */
  currentSandboxId?: string | null;
  snapshotHasDeps?: boolean;
  serviceCommands?: ServiceCommand[];
  /**
   * Env files the boot generates with `sandbox env apply` (sandbox/cli/env-spec.ts): paths and
   * key names, no values; the values come from the sandbox's environment or values file.
   */
  envFiles?: SessionEnvFiles;
  sessionType?: SessionType;
  sshPublicKey?: string;
  triggerContext?: Record<string, unknown>;
  /** The git author of the agent's commits (the session's user). */
  gitIdentity?: GitIdentity;
  /**
   * Where the sandbox's sidecar asks for its session's credentials (git tokens, env-file values):
   * the control plane's public base URL. Unset: the sandbox gets no credentials.
   */
  controlPlaneUrl?: string;
  /** seed 003 §6.7: `git pull --ff-only` on restore (SANDBOX_GIT_PULL_ON_RESTORE / _CADENCE_SECONDS). */
  gitFreshness?: GitFreshnessConfig;
  /**
   * Start `serviceCommands` at boot even when the snapshot is not known to hold their
   * dependencies: the session named them itself (seed 000's `snapshotHasDeps` gate is for
   * commands that come from a repo or prebuild configuration).
   */
  autoStartServices?: boolean;
}

export interface CreateSandboxResult {
  sandboxId: string;
  /** OpenCode API base URL (HTTP + SSE). */
  tunnelUrl: string;
  /** Preview proxy URL, when the provider exposes one. */
  previewUrl: string | null;
  sshHost?: string;
  sshPort?: number;
  /**
   * How SSH reaches `sshHost:sshPort`: raw TCP, or TLS around it (Modal's V2 backend has
   * encrypted tunnels only: `ssh -o ProxyCommand='openssl s_client -quiet -connect %h:%p'`).
   */
  sshTransport?: "tcp" | "tls";
  /** Epoch ms at which the provider will kill the sandbox. */
  expiresAt: number | null;
}

export interface EnsureSandboxResult extends CreateSandboxResult {
  /** True when an existing live sandbox was recovered rather than a new one created. */
  recovered: boolean;
}

export interface SnapshotResult {
  snapshotId: string;
  /**
   * Epoch ms after which the provider no longer restores this snapshot (Modal memory snapshots:
   * 7 days; a filesystem snapshot taken with a TTL). Null or absent: kept until `deleteSnapshot`.
   */
  expiresAt?: number | null;
}

export interface PauseResult {
  /** For providers with native pause the snapshot id is the sandbox id itself. */
  snapshotId: string;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Where a running sandbox answers (never shown to clients: they get short-lived access instead). */
export interface SandboxTunnels {
  openCodeUrl: string;
  previewUrl: string | null;
  /**
   * The sidecar API base (sandbox/sidecar): on the image providers the preview tunnel's
   * `/_sandbox/sidecar` route (port 4000 is not tunnelled); locally its own port. Null when
   * the sandbox has none.
   */
  sidecarUrl: string | null;
}

/** One sandbox from `listSandboxes` (the orphan sweeper's view, seed 002 §11). */
export interface ListedSandbox {
  sandboxId: string;
  /** The session the sandbox was created for (from its tag/metadata/name), null when unknown. */
  sessionId: string | null;
  /** Epoch ms the sandbox started, when the provider says. */
  startedAt: number | null;
  /** "running" | "paused" (E2B paused sandboxes are listed as paused). */
  state: "running" | "paused";
}

export interface SandboxProvider {
  readonly type: ProviderType;
  /** Can pause and resume from the same id (E2B). */
  readonly supportsPause: boolean;
  /** The provider auto-pauses on expiry (E2B). */
  readonly supportsAutoPause: boolean;
  /** Memory snapshots (Modal, seed 002 §1): `memorySnapshot` returns `mem:`-prefixed ids. */
  readonly supportsMemorySnapshot: boolean;
  /**
   * Whether a sandbox created from `snapshotId` resumes the processes it had (a memory snapshot,
   * a paused sandbox) rather than booting: its sidecar keeps the sandbox key it booted with, so
   * the session keeps its key epoch (issue 14 §2). Absent: never (every create boots).
   */
  keepsProcesses?(snapshotId: string | null | undefined): boolean;

  /** Find-or-create, idempotent: recovers a live sandbox for the session, else creates one. The preferred entry point. */
  ensureSandbox(opts: CreateSandboxOpts): Promise<EnsureSandboxResult>;
  /** Always creates a fresh sandbox (from `snapshotId` when given). */
  createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult>;
  /** Filesystem snapshot without stopping the sandbox. */
  snapshot(sessionId: string, sandboxId: string): Promise<SnapshotResult>;
  /** Native pause; throws `ProviderError` (operation "pause") when `supportsPause` is false. */
  pause(sessionId: string, sandboxId: string): Promise<PauseResult>;
  /** Memory snapshot (`mem:` id); throws when `supportsMemorySnapshot` is false. */
  memorySnapshot(sessionId: string, sandboxId: string): Promise<SnapshotResult>;
  /**
   * Deletes a snapshot this provider returned (`snapshot`, `memorySnapshot`, `pause`).
   * Idempotent: a snapshot that is already gone is success.
   */
  deleteSnapshot(snapshotId: string): Promise<void>;
  /** Idempotent: a sandbox that is already gone is success. */
  terminate(sessionId: string, sandboxId?: string | null): Promise<void>;
  /** Batch liveness, side-effect free: returns the ids among `sandboxIds` that are alive. */
  checkSandboxes(sandboxIds: string[]): Promise<string[]>;
  /** Sandboxes this control plane created that are still alive (running or paused), all pages. */
  listSandboxes(): Promise<ListedSandbox[]>;
  health(): Promise<boolean>;
  resolveTunnels(sandboxId: string): Promise<SandboxTunnels>;
  execCommand?(sandboxId: string, argv: string[], opts?: { cwd?: string; timeoutMs?: number }): Promise<ExecResult>;
}
