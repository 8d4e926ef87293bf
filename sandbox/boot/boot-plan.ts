/**
 * The boot sequence as data (seed 003 §6.4). Pure: `planBoot(spec, secrets)` decides every step,
 * the runner (boot-runner.ts) times them and the executor (step-executor.ts) does the I/O, so the
 * rules a reader needs are all here:
 *
 * Phase 1, blocking (the sandbox is not usable before it ends):
 *   when a repo names a credential, the sidecar is started first (not waited for): git's
 *   credential helper asks it, over its Unix socket, for the token while the repos clone (and
 *   during the freshness pull); otherwise it starts in phase 2, off the critical path;
 *   git config: the user's identity and that credential helper (no token is ever written);
 *   workspace: clone each repo (fresh: whole history unless a depth is asked, then the pinned
 *   ref) or read the snapshot's metadata (restored);
 *   OpenCode config, plugin, tools (setup-only tools only for setup sessions), instructions,
 *   SSH key, trigger context; start OpenCode and wait until `/session` answers.
 *   With a sandbox key (`SIDECAR_TOKEN`), OpenCode gets the password derived from it
 *   (`OPENCODE_SERVER_PASSWORD`, its env only: its tunnel is public) and the wait authenticates.
 * Phase 2, fire-and-forget (failures are logged, never fatal):
 *   git freshness pull (restored only; the helper fetches a fresh credential), infrastructure
 *   services, Caddy, wait for the sidecar, env files (values from the org's secrets through the
 *   sidecar), service commands (when the snapshot has the dependencies installed, or the session
 *   named them itself).
 */
import type { SessionMetadata } from "../../functions/domain/git-freshness";
import { AGENT_PASSWORD_ENV, SANDBOX_KEY_FILE_ENV, agentAuthorization, deriveAgentPassword } from "../shared/access-token";
import type { BootCommand, BootSpec } from "./boot-spec";
import { homeEnv, repoDir, repoDirName, sandboxFiles } from "./layout";
import { PLUGIN_SOURCE, AGENT_TOOLS, configDirPackageFiles, openCodeConfig, toolsFor, DEFAULT_MODEL_ID, DEV_MODEL_KEY_ENV, type ModelChoice } from "./opencode-files";

export type FileOp =
  | { op: "mkdir"; path: string }
  | { op: "write"; path: string; content: string; mode?: number }
  /** Appends `line` unless the file already has it (idempotent across reboots). */
  | { op: "append-line"; path: string; line: string; mode?: number }
  | { op: "symlink"; path: string; target: string }
  | { op: "remove"; path: string };

/** Long-running processes the boot starts; the sandbox lives as long as `opencode` does (restarts included, supervisor.ts). */
export type ProcessId = "opencode" | "caddy" | "sidecar";

export type BootStep =
  /** `depth` null: the whole history; `ref`: a commit or tag checked out after the clone (seed 004 `REPO_REF`). */
  | { kind: "clone"; name: string; url: string; branch: string | null; dir: string; depth: number | null; ref: string | null }
  | { kind: "write-metadata"; name: string; path: string; metadata: SessionMetadata }
  /** Keeps the snapshot's git-freshness clock, rewrites the rest for this session and layout. */
  | { kind: "restore-metadata"; name: string; path: string; metadata: SessionMetadata }
  | { kind: "files"; name: string; ops: FileOp[] }
  /** `requiredKeySha256`: the model answers 401 unless the request's key hashes to it (tests prove the key reached OpenCode). */
  | { kind: "start-dev-model"; name: string; port: number; requiredKeySha256: string | null }
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
 * What the plan needs that the spec never carries (boot-spec.ts: model keys arrive through the
 * boot's environment, the sandbox key through its key file). Values only go into step fields
 * that the runner does not log.
 */
export interface BootSecrets {
  /** OpenCode's server password; null runs OpenCode without one (no sandbox key, as in old tests). */
  agentPassword: string | null;
  /** The development model's key is in the environment (`DEV_MODEL_API_KEY`): OpenCode sends it. */
  devModelKey: boolean;
}

export const NO_SECRETS: BootSecrets = { agentPassword: null, devModelKey: false };

/** The secrets the boot derives: the agent password from the sandbox key (its key file, never its environment). */
export function bootSecrets(env: Readonly<Record<string, string | undefined>>, sandboxKey: string | undefined): BootSecrets {
  return { agentPassword: sandboxKey ? deriveAgentPassword(sandboxKey) : null, devModelKey: Boolean(env[DEV_MODEL_KEY_ENV]) };
}

/** A clone is bounded (seed 004 step 4); the boot's `start` mode waits at most this per repo. */
export const CLONE_TIMEOUT_MS = 300_000;
const CLI_TIMEOUT_MS = 120_000;

function modelChoice(spec: BootSpec, secrets: BootSecrets): ModelChoice {
  if (spec.layout.devModel) return { kind: "dev", port: spec.layout.devModel.port, apiKeyEnv: secrets.devModelKey ? DEV_MODEL_KEY_ENV : null };
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

/**
 * The OpenCode config every boot writes and passes as `OPENCODE_CONFIG_CONTENT`. It never holds a
 * key: a model key stays in OpenCode's environment (`{env:NAME}` in the config).
 */
export function bootOpenCodeConfig(spec: BootSpec, secrets: BootSecrets = NO_SECRETS): Record<string, unknown> {
  const files = sandboxFiles(spec.layout);
  return openCodeConfig({ model: modelChoice(spec, secrets), instructionsPath: spec.request.systemPrompt ? files.instructions : null });
}

/** POSIX single-quoting for the helper command git runs through `sh`. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** A git config value, double-quoted (git's own escaping). */
function gitConfigValue(value: string): string {
  return `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, " ")}"`;
}

/**
 * `~/.gitconfig`: the session user's identity and the credential helper (the in-sandbox CLI
 * asking the sidecar's socket). `helper =` first clears helpers from system config, so no other
 * helper ever stores a token on disk; `useHttpPath` sends the repo path, so each repo gets its
 * own credential. Null when there is nothing to configure.
 */
export function gitConfigFile(spec: BootSpec): string | null {
  const { request, layout } = spec;
  const socket = layout.sidecar?.socket ?? null;
  const helper = socket && layout.cli && request.controlPlaneUrl ? [...layout.cli.argv, "git-credential", "--socket", socket] : null;
  if (!request.gitIdentity && !helper) return null;
  const lines = ["# Written by the sandbox boot at every start (sandbox/boot/boot-plan.ts); edits are replaced."];
  if (request.gitIdentity) {
    lines.push("[user]", `\tname = ${gitConfigValue(request.gitIdentity.name)}`, `\temail = ${gitConfigValue(request.gitIdentity.email)}`);
  }
  if (helper) {
    lines.push("[credential]", "\thelper =", `\thelper = ${gitConfigValue(`!${helper.map(shellWord).join(" ")}`)}`, "\tuseHttpPath = true");
  }
  return `${lines.join("\n")}\n`;
}

function sidecarUrlOf(layout: BootSpec["layout"]): string | null {
  return layout.sidecar ? localUrl(layout.sidecar.host, layout.sidecar.port) : null;
}

/**
 * Git asks the sidecar for credentials during the boot itself (clone, freshness pull): then it
 * must start before them. Starting it also costs about a second of a 2-core sandbox's boot
 * (bench section 7), so otherwise it starts in phase 2.
 */
function sidecarFirst(spec: BootSpec): boolean {
  return spec.request.controlPlaneUrl !== null && spec.request.repos.some((r) => r.credential !== undefined);
}

/**
 * Defines the service commands and starts the sidecar (phase 1 or 2, see `sidecarFirst`; always
 * waited for in phase 2): the sandbox key stays in its environment only (step-executor.ts), and
 * the control plane's URL tells it where to ask for credentials.
 */
function sidecarSteps(spec: BootSpec): BootStep[] {
  const { request, layout } = spec;
  if (!layout.sidecar) return [];
  const files = sandboxFiles(layout);
  return [
    {
      kind: "files",
      name: "write service definitions",
      ops: [{ op: "write", path: files.servicesFile, content: JSON.stringify(request.serviceCommands.map((s) => ({ ...s, cwd: s.cwd ?? "." }))) }],
    },
    {
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
        // The key arrives on its stdin (step-executor.ts), never in an environment.
        [SANDBOX_KEY_FILE_ENV]: "-",
        SERVICES_FILE: files.servicesFile,
        ...(layout.sidecar.socket ? { SIDECAR_SOCKET: layout.sidecar.socket } : {}),
        ...(request.controlPlaneUrl ? { CONTROL_PLANE_URL: request.controlPlaneUrl } : {}),
        ...(layout.caddy ? { CADDY_ADMIN_URL: layout.caddy.adminUrl } : {}),
      },
      log: `${layout.logDir}/sidecar.log`,
    },
  ];
}

function phase1(spec: BootSpec, secrets: BootSecrets): BootStep[] {
  const { request, layout } = spec;
  const files = sandboxFiles(layout);
  const steps: BootStep[] = sidecarFirst(spec) ? sidecarSteps(spec) : [];
  const metadata = freshMetadata(spec);
  const gitConfig = gitConfigFile(spec);
  if (gitConfig) steps.push({ kind: "files", name: "write git config", ops: [{ op: "write", path: files.gitConfig, content: gitConfig }] });

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
        depth: repo.depth ?? null,
        ref: repo.ref ?? null,
      });
    }
    steps.push({ kind: "write-metadata", name: "write metadata", path: files.metadata, metadata });
  }

  const config = bootOpenCodeConfig(spec, secrets);
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

  if (layout.devModel) {
    steps.push({ kind: "start-dev-model", name: "start dev model", port: layout.devModel.port, requiredKeySha256: layout.devModel.requiredKeySha256 ?? null });
  }
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
      // OpenCode reads `opencode.json` and `.opencode/` in every ancestor of its directory up to
      // the git worktree, which is `/` for a workspace outside git: on a local sandbox those are
      // the host's (e.g. `/tmp/.opencode`). Its custom tools then wait for an npm install into each
      // such dir (minutes against the unreachable registry). The agent is configured by the boot
      // alone: OPENCODE_CONFIG_CONTENT and the config dir written above.
      OPENCODE_DISABLE_PROJECT_CONFIG: "1",
      ...(secrets.agentPassword ? { [AGENT_PASSWORD_ENV]: secrets.agentPassword } : {}),
      // The agent's own tools call the sidecar's socket (issue 25 §4). A path, not a credential:
      // the socket's mode is the auth, and the agent's shell runs as its owner anyway.
      ...(layout.sidecar?.socket && request.controlPlaneUrl ? { SIDECAR_SOCKET: layout.sidecar.socket } : {}),
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
  const sidecarUrl = sidecarUrlOf(layout);
  // Its service definitions are written with it; `services start` below starts them.
  if (!sidecarFirst(spec)) steps.push(...sidecarSteps(spec));
  if (sidecarUrl) steps.push({ kind: "wait-http", name: "wait for sidecar", url: `${sidecarUrl}/health`, budgetMs: layout.readinessBudgetMs, process: "sidecar" });
  const socket = layout.sidecar?.socket ?? null;
  const cliEnv = {
    ...homeEnv(layout.home),
    WORKSPACE_DIR: layout.workspace,
    ENV_VALUES_FILE: files.envJson,
    ...(sidecarUrl ? { SIDECAR_URL: sidecarUrl } : {}),
    // `env apply` reads the org's secret values from the sidecar (only when it can ask for them).
    ...(socket && request.controlPlaneUrl ? { SIDECAR_SOCKET: socket } : {}),
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
  // seed 000: service commands auto-start only when the snapshot has their dependencies, unless
  // the session named them itself (then they start at every boot).
  if ((request.snapshotHasDeps || request.autoStartServices) && request.serviceCommands.length > 0 && sidecarUrl && layout.cli) {
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
