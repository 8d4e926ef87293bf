/**
 * The boot sequence as data (seed 003 §6.4). Pure: `planBoot(spec, secrets)` decides every step,
 * the runner (boot-runner.ts) times them and the executor (step-executor.ts) does the I/O, so the
 * rules a reader needs are all here:
 *
 * Phase 1, blocking (the sandbox is not usable before it ends):
 *   workspace: clone each repo (fresh) or read the snapshot's metadata (restored);
 *   OpenCode config, plugin, tools (setup-only tools only for setup sessions), instructions,
 *   SSH key, trigger context; start OpenCode and wait until `/session` answers.
 *   With a sandbox key (`SIDECAR_TOKEN`), OpenCode gets the password derived from it
 *   (`OPENCODE_SERVER_PASSWORD`, its env only: its tunnel is public) and the wait authenticates.
 * Phase 2, fire-and-forget (failures are logged, never fatal):
 *   git freshness pull (restored only), infrastructure services, Caddy, the sidecar, env files,
 *   service commands (only when the snapshot has the dependencies installed).
 */
import type { SessionMetadata } from "../../functions/domain/git-freshness";
import { AGENT_PASSWORD_ENV, SANDBOX_KEY_ENV, agentAuthorization, deriveAgentPassword } from "../shared/access-token";
import type { BootCommand, BootSpec } from "./boot-spec";
import { homeEnv, repoDir, repoDirName, sandboxFiles } from "./layout";
import { PLUGIN_SOURCE, AGENT_TOOLS, configDirPackageFiles, openCodeConfig, toolsFor, DEFAULT_MODEL_ID, type ModelChoice } from "./opencode-files";

export type FileOp =
  | { op: "mkdir"; path: string }
  | { op: "write"; path: string; content: string; mode?: number }
  /** Appends `line` unless the file already has it (idempotent across reboots). */
  | { op: "append-line"; path: string; line: string; mode?: number }
  | { op: "symlink"; path: string; target: string }
  | { op: "remove"; path: string };

/** Long-running processes the boot starts; the sandbox lives as long as `opencode` does. */
export type ProcessId = "opencode" | "caddy" | "sidecar";

export type BootStep =
  | { kind: "clone"; name: string; url: string; branch: string | null; dir: string }
  | { kind: "write-metadata"; name: string; path: string; metadata: SessionMetadata }
  /** Keeps the snapshot's git-freshness clock, rewrites the rest for this session and layout. */
  | { kind: "restore-metadata"; name: string; path: string; metadata: SessionMetadata }
  | { kind: "files"; name: string; ops: FileOp[] }
  | { kind: "start-dev-model"; name: string; port: number }
  | { kind: "spawn"; name: string; process: ProcessId; command: BootCommand; cwd: string; env: Record<string, string>; log: string }
  /**
   * Polls `url` with the readiness backoff; fails at once if `process` exited, skips if it never
   * started. `headers` go with every probe (OpenCode's `authorization`: a credential, never logged).
   */
  | { kind: "wait-http"; name: string; url: string; budgetMs: number; process: ProcessId; headers?: Record<string, string> }
  | { kind: "git-pull"; name: string; metadataPath: string; dirs: string[]; enabled: boolean; cadenceSeconds: number; now: number }
  /**
   * A command run to completion. `sidecarAccess`: it calls the sidecar, so it gets a short-lived
   * access token as `SIDECAR_TOKEN` (never the sandbox key itself, which only the sidecar holds).
   */
  | { kind: "run"; name: string; command: BootCommand; cwd: string; env: Record<string, string>; timeoutMs: number; sidecarAccess?: boolean };

export interface BootPlan {
  phase1: BootStep[];
  phase2: BootStep[];
}

/**
 * What the plan needs that the spec never carries (boot-spec.ts: secrets arrive through the
 * boot's environment). Values only go into step fields that the runner does not log.
 */
export interface BootSecrets {
  /** OpenCode's server password; null runs OpenCode without one (no sandbox key, as in old tests). */
  agentPassword: string | null;
}

export const NO_SECRETS: BootSecrets = { agentPassword: null };

/** The secrets the boot derives from its environment: the agent password from the sandbox key. */
export function bootSecrets(env: Readonly<Record<string, string | undefined>>): BootSecrets {
  const sandboxKey = env[SANDBOX_KEY_ENV];
  return { agentPassword: sandboxKey ? deriveAgentPassword(sandboxKey) : null };
}

/** A clone is bounded (seed 004 step 4); the boot's `start` mode waits at most this per repo. */
export const CLONE_TIMEOUT_MS = 300_000;
const CLI_TIMEOUT_MS = 120_000;

function modelChoice(spec: BootSpec): ModelChoice {
  if (spec.layout.devModel) return { kind: "dev", port: spec.layout.devModel.port };
  return { kind: "id", modelId: spec.request.modelId ?? DEFAULT_MODEL_ID };
}

function freshMetadata(spec: BootSpec): SessionMetadata {
  const first = spec.request.repos[0];
  return {
    sessionId: spec.request.sessionId,
    repoDir: first ? repoDir(spec.layout.workspace, first) : spec.layout.workspace,
    createdAt: spec.request.now,
  };
}

function localUrl(hostname: string, port: number): string {
  // OpenCode listening on every interface is reached on loopback from inside the sandbox.
  const host = hostname === "0.0.0.0" ? "127.0.0.1" : hostname;
  return `http://${host}:${port}`;
}

/** The OpenCode config every boot writes and passes as `OPENCODE_CONFIG_CONTENT`. */
export function bootOpenCodeConfig(spec: BootSpec): Record<string, unknown> {
  const files = sandboxFiles(spec.layout);
  return openCodeConfig({ model: modelChoice(spec), instructionsPath: spec.request.systemPrompt ? files.instructions : null });
}

function phase1(spec: BootSpec, secrets: BootSecrets): BootStep[] {
  const { request, layout } = spec;
  const files = sandboxFiles(layout);
  const steps: BootStep[] = [];
  const metadata = freshMetadata(spec);

  // Workspace: a restored filesystem already holds the repos (with the agent's edits).
  if (request.restored) {
    steps.push({ kind: "restore-metadata", name: "read snapshot metadata", path: files.metadata, metadata });
  } else {
    for (const repo of request.repos) {
      steps.push({
        kind: "clone",
        name: `clone ${repoDirName(repo.url, repo.workspacePath)}`,
        url: repo.url,
        branch: repo.branch ?? null,
        dir: repoDir(layout.workspace, repo),
      });
    }
    steps.push({ kind: "write-metadata", name: "write metadata", path: files.metadata, metadata });
  }

  const config = bootOpenCodeConfig(spec);
  const pkg = configDirPackageFiles();
  steps.push({
    kind: "files",
    name: "write opencode config",
    ops: [
      { op: "mkdir", path: files.opencodeConfigDir },
      { op: "write", path: files.opencodeConfig, content: `${JSON.stringify(config, null, 2)}\n` },
      { op: "write", path: `${files.opencodeConfigDir}/package.json`, content: pkg.packageJson },
      { op: "write", path: `${files.opencodeConfigDir}/package-lock.json`, content: pkg.packageLock },
      { op: "mkdir", path: `${files.opencodeConfigDir}/node_modules` },
      ...(layout.toolModules
        ? [{ op: "symlink" as const, path: `${files.opencodeConfigDir}/node_modules/zod`, target: `${layout.toolModules}/zod` }]
        : []),
    ],
  });
  steps.push({ kind: "files", name: "write plugin", ops: [{ op: "write", path: files.plugin, content: PLUGIN_SOURCE }] });

  // A snapshot of a setup session must not hand its setup-only tools to a coding session.
  const tools = toolsFor(request.sessionType);
  const dropped = AGENT_TOOLS.filter((t) => !tools.includes(t));
  steps.push({
    kind: "files",
    name: "write tools",
    ops: [
      ...tools.map((t) => ({ op: "write" as const, path: `${files.toolDir}/${t.name}.ts`, content: t.source })),
      ...dropped.map((t) => ({ op: "remove" as const, path: `${files.toolDir}/${t.name}.ts` })),
    ],
  });
  steps.push({
    kind: "files",
    name: "write instructions",
    ops: [request.systemPrompt ? { op: "write", path: files.instructions, content: request.systemPrompt } : { op: "remove", path: files.instructions }],
  });
  if (request.sshPublicKey) {
    steps.push({
      kind: "files",
      name: "write ssh key",
      ops: [{ op: "append-line", path: files.authorizedKeys, line: request.sshPublicKey.trim(), mode: 0o600 }],
    });
  }
  if (request.triggerContext) {
    steps.push({
      kind: "files",
      name: "write trigger context",
      ops: [{ op: "write", path: files.triggerContext, content: JSON.stringify(request.triggerContext, null, 2) }],
    });
  }

  if (layout.devModel) steps.push({ kind: "start-dev-model", name: "start dev model", port: layout.devModel.port });
  const oc = layout.opencode;
  steps.push({
    kind: "spawn",
    name: "start opencode",
    process: "opencode",
    command: { argv: [oc.bin, "serve", "--port", String(oc.port), "--hostname", oc.hostname] },
    cwd: layout.workspace,
    env: {
      ...homeEnv(layout.home),
      OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
      ...(secrets.agentPassword ? { [AGENT_PASSWORD_ENV]: secrets.agentPassword } : {}),
    },
    log: `${layout.logDir}/opencode.log`,
  });
  steps.push({
    kind: "wait-http",
    name: "wait for opencode",
    url: `${localUrl(oc.hostname, oc.port)}/session`,
    budgetMs: layout.readinessBudgetMs,
    process: "opencode",
    ...(secrets.agentPassword ? { headers: { authorization: agentAuthorization(secrets.agentPassword) } } : {}),
  });
  return steps;
}

function gitPullStep(spec: BootSpec): BootStep | null {
  const { request, layout } = spec;
  const freshness = request.gitFreshness;
  if (!request.restored || !freshness?.enabled || request.repos.length === 0) return null;
  return {
    kind: "git-pull",
    name: "git freshness pull",
    metadataPath: sandboxFiles(layout).metadata,
    dirs: request.repos.map((r) => repoDir(layout.workspace, r)),
    enabled: freshness.enabled,
    cadenceSeconds: freshness.cadenceSeconds,
    now: request.now,
  };
}

function phase2(spec: BootSpec): BootStep[] {
  const { request, layout } = spec;
  const files = sandboxFiles(layout);
  const steps: BootStep[] = [];
  const pull = gitPullStep(spec);
  if (pull) steps.push(pull);
  if (layout.servicesScript) {
    steps.push({
      kind: "run",
      name: "start infrastructure services",
      command: { argv: [layout.servicesScript], requires: layout.servicesScript },
      cwd: layout.home,
      env: homeEnv(layout.home),
      timeoutMs: CLI_TIMEOUT_MS,
    });
  }
  if (layout.caddy) {
    steps.push({
      kind: "spawn",
      name: "start caddy",
      process: "caddy",
      command: { argv: [layout.caddy.bin, "run", "--config", layout.caddy.caddyfile, "--adapter", "caddyfile"] },
      cwd: layout.home,
      env: homeEnv(layout.home),
      log: `${layout.logDir}/caddy.log`,
    });
    steps.push({ kind: "wait-http", name: "wait for caddy", url: `${layout.caddy.adminUrl}/config/`, budgetMs: layout.readinessBudgetMs, process: "caddy" });
  }
  const sidecarUrl = layout.sidecar ? `${localUrl(layout.sidecar.host, layout.sidecar.port)}` : null;
  if (layout.sidecar && sidecarUrl) {
    // Defined, not started: the sidecar lists them, and `services start` below starts them.
    steps.push({
      kind: "files",
      name: "write service definitions",
      ops: [{ op: "write", path: files.servicesFile, content: JSON.stringify(request.serviceCommands.map((s) => ({ ...s, cwd: s.cwd ?? "." }))) }],
    });
    steps.push({
      kind: "spawn",
      name: "start sidecar",
      process: "sidecar",
      command: layout.sidecar.command,
      cwd: layout.workspace,
      env: {
        ...homeEnv(layout.home),
        SIDECAR_PORT: String(layout.sidecar.port),
        SIDECAR_HOST: layout.sidecar.host,
        WORKSPACE_DIR: layout.workspace,
        SIDECAR_STATE_DIR: files.sidecarState,
        SERVICES_FILE: files.servicesFile,
        ...(layout.caddy ? { CADDY_ADMIN_URL: layout.caddy.adminUrl } : {}),
      },
      log: `${layout.logDir}/sidecar.log`,
    });
    steps.push({ kind: "wait-http", name: "wait for sidecar", url: `${sidecarUrl}/health`, budgetMs: layout.readinessBudgetMs, process: "sidecar" });
  }
  const cliEnv = {
    ...homeEnv(layout.home),
    WORKSPACE_DIR: layout.workspace,
    ENV_VALUES_FILE: files.envJson,
    ...(sidecarUrl ? { SIDECAR_URL: sidecarUrl } : {}),
  };
  if (request.envFiles !== undefined && layout.cli) {
    steps.push({ kind: "files", name: "write env spec", ops: [{ op: "write", path: files.envSpec, content: JSON.stringify(request.envFiles), mode: 0o600 }] });
    steps.push({
      kind: "run",
      name: "apply env files",
      command: { ...layout.cli, argv: [...layout.cli.argv, "env", "apply", "--spec", files.envSpec] },
      cwd: layout.workspace,
      env: cliEnv,
      timeoutMs: CLI_TIMEOUT_MS,
    });
  }
  // seed 000: service commands auto-start only when the snapshot has their dependencies.
  if (request.snapshotHasDeps && request.serviceCommands.length > 0 && sidecarUrl && layout.cli) {
    steps.push({
      kind: "run",
      name: "start service commands",
      command: { ...layout.cli, argv: [...layout.cli.argv, "services", "start"] },
      cwd: layout.workspace,
      env: cliEnv,
      timeoutMs: CLI_TIMEOUT_MS,
      sidecarAccess: true,
    });
  }
  return steps;
}

export function planBoot(spec: BootSpec, secrets: BootSecrets = NO_SECRETS): BootPlan {
  return { phase1: phase1(spec, secrets), phase2: phase2(spec) };
}

/**
 * A resumed sandbox (E2B native pause) kept its processes and files: only the git freshness
 * pull applies (seed 003 §6.7).
 */
export function planResume(spec: BootSpec): BootStep[] {
  const pull = gitPullStep({ ...spec, request: { ...spec.request, restored: true } });
  return pull ? [pull] : [];
}

/** How long phase 1 may take at most: clones plus readiness plus slack for the file writes and starts. */
export function phase1DeadlineMs(spec: BootSpec): number {
  const clones = spec.request.restored ? 0 : spec.request.repos.length;
  return clones * CLONE_TIMEOUT_MS + spec.layout.readinessBudgetMs * 3 + 60_000;
}
