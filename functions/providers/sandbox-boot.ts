/**
 * The boot sequence the cloud providers (Modal, E2B) run inside a fresh sandbox (seed 003 §6.4),
 * expressed as argv steps over whatever exec API the provider's SDK has. Deliberately small:
 * a later issue replaces `bootSteps` with the sandbox image's own boot script, so the providers
 * only depend on `runBootSequence(exec, steps)` and `waitForOpenCodeReady`.
 */
import type { RepoSpec } from "../domain/session";
import { metadataAfterPull, shouldPullOnRestore, type GitFreshnessConfig, type SessionMetadata } from "../domain/git-freshness";
import type { CreateSandboxOpts, ExecResult } from "../ports/sandbox-provider";

/** seed 003 §4 "Standard Ports": OpenCode and preview are HTTPS tunnels, SSH is raw TCP. */
export const SANDBOX_PORTS = { opencode: 4096, preview: 20000, ssh: 22 } as const;

/** seed 003 §4 "Sandbox Filesystem Layout". */
export const SANDBOX_PATHS = {
  workspace: "/home/user/workspace",
  globalOpencodeConfig: "/home/user/.config/opencode/opencode.json",
  localOpencodeConfig: "/home/user/workspace/opencode.json",
  instructions: "/home/user/workspace/.opencode/instructions.md",
  metadata: "/home/user/.proliferate/metadata.json",
  triggerContext: "/home/user/workspace/.proliferate/trigger-context.json",
  authorizedKeys: "/home/user/.ssh/authorized_keys",
  envJson: "/tmp/.proliferate_env.json",
  envProfile: "/home/user/.env.proliferate",
  opencodeLog: "/tmp/opencode.log",
} as const;

export type SandboxExec = (argv: string[], opts?: { cwd?: string; timeoutMs?: number }) => Promise<ExecResult>;

export interface BootStep {
  name: string;
  argv: string[];
}

/** POSIX single-quote escaping: the only safe way to put user-provided values in `sh -c`. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(argv: string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : shellQuote(a))).join(" ");
}

/** Env injected into every sandbox; `SESSION_ID` is set last so a caller cannot spoof it. */
export function buildSandboxEnv(opts: Pick<CreateSandboxOpts, "sessionId" | "envVars">): Record<string, string> {
  return { ...opts.envVars, SESSION_ID: opts.sessionId };
}

/** Where a repo is cloned: `workspacePath` when given ("." is the workspace itself), else the repo name. */
export function repoDir(repo: RepoSpec): string {
  const path = repo.workspacePath ?? repoName(repo.url);
  return path === "." ? SANDBOX_PATHS.workspace : `${SANDBOX_PATHS.workspace}/${path}`;
}

function repoName(url: string): string {
  const last = url.replace(/\/+$/, "").split(/[/:]/).pop() ?? "repo";
  return last.replace(/\.git$/, "") || "repo";
}

export function opencodeConfig(opts: Pick<CreateSandboxOpts, "agentConfig" | "systemPrompt">): Record<string, unknown> {
  return {
    $schema: "https://opencode.ai/config.json",
    ...(opts.agentConfig?.modelId ? { model: opts.agentConfig.modelId } : {}),
    ...(opts.systemPrompt ? { instructions: [".opencode/instructions.md"] } : {}),
  };
}

function writeFileStep(name: string, path: string, content: string, mode: "write" | "append" = "write"): BootStep {
  const dir = path.slice(0, path.lastIndexOf("/"));
  // base64 keeps arbitrary content (quotes, newlines) out of the shell's parser.
  const b64 = Buffer.from(content, "utf8").toString("base64");
  const redirect = mode === "append" ? ">>" : ">";
  return { name, argv: ["sh", "-c", `mkdir -p ${shellQuote(dir)} && printf %s ${b64} | base64 -d ${redirect} ${shellQuote(path)}`] };
}

function backgroundStep(name: string, command: string, cwd: string, log: string): BootStep {
  return { name, argv: ["sh", "-c", `cd ${shellQuote(cwd)} && nohup sh -c ${shellQuote(command)} > ${shellQuote(log)} 2>&1 &`] };
}

/**
 * The essential boot (seed 003 §6.4 phase 1). `restored` means the filesystem came from a
 * snapshot: repos and metadata are already there, but processes are not, so config is rewritten
 * and OpenCode restarted. Service commands only auto-start when the snapshot has deps
 * (seed 000 "snapshotHasDeps gates service auto-start").
 */
export function bootSteps(opts: CreateSandboxOpts, context: { restored: boolean; now: number }): BootStep[] {
  const steps: BootStep[] = [];
  if (!context.restored) {
    for (const repo of opts.repos) {
      const dir = shellQuote(repoDir(repo));
      const url = shellQuote(repo.url);
      // seed 003 §6.2 edge case: a branch that fails to clone falls back to the default branch.
      const clone = repo.branch
        ? `git clone --depth 1 --branch ${shellQuote(repo.branch)} ${url} ${dir} || git clone --depth 1 ${url} ${dir}`
        : `git clone --depth 1 ${url} ${dir}`;
      steps.push({ name: `clone ${repoName(repo.url)}`, argv: ["sh", "-c", `mkdir -p ${shellQuote(SANDBOX_PATHS.workspace)} && ${clone}`] });
    }
    const first = opts.repos[0];
    const metadata: SessionMetadata = {
      sessionId: opts.sessionId,
      repoDir: first ? repoDir(first) : SANDBOX_PATHS.workspace,
      createdAt: context.now,
    };
    steps.push(writeFileStep("write metadata", SANDBOX_PATHS.metadata, JSON.stringify(metadata)));
  }
  const config = JSON.stringify(opencodeConfig(opts), null, 2);
  steps.push(writeFileStep("write opencode config", SANDBOX_PATHS.globalOpencodeConfig, config));
  steps.push(writeFileStep("write local opencode config", SANDBOX_PATHS.localOpencodeConfig, config));
  if (opts.systemPrompt) steps.push(writeFileStep("write instructions", SANDBOX_PATHS.instructions, opts.systemPrompt));
  if (opts.sshPublicKey) steps.push(writeFileStep("write ssh key", SANDBOX_PATHS.authorizedKeys, `${opts.sshPublicKey.trim()}\n`, "append"));
  if (opts.triggerContext) {
    steps.push(writeFileStep("write trigger context", SANDBOX_PATHS.triggerContext, JSON.stringify(opts.triggerContext)));
  }
  steps.push(
    backgroundStep(
      "start opencode",
      `opencode serve --port ${SANDBOX_PORTS.opencode} --hostname 0.0.0.0`,
      SANDBOX_PATHS.workspace,
      SANDBOX_PATHS.opencodeLog,
    ),
  );
  if (opts.snapshotHasDeps) {
    for (const svc of opts.serviceCommands ?? []) {
      const cwd = svc.cwd ? `${SANDBOX_PATHS.workspace}/${svc.cwd.replace(/^\/+/, "")}` : SANDBOX_PATHS.workspace;
      steps.push(backgroundStep(`start service ${svc.name}`, svc.command, cwd, `/tmp/service-${svc.name.replace(/[^A-Za-z0-9_-]/g, "_")}.log`));
    }
  }
  return steps;
}

const MAX_STDERR_IN_ERROR = 2_000;

/** Runs steps in order; the first non-zero exit fails the boot with that step's name. */
export async function runBootSequence(exec: SandboxExec, steps: BootStep[]): Promise<void> {
  for (const step of steps) {
    const result = await exec(step.argv);
    if (result.exitCode !== 0) {
      throw new Error(`boot step "${step.name}" exited ${result.exitCode}: ${result.stderr.slice(0, MAX_STDERR_IN_ERROR)}`);
    }
  }
}

export interface ReadinessDeps {
  fetch: (url: string) => Promise<{ ok: boolean }>;
  sleep: (ms: number) => Promise<void>;
}

export const defaultReadinessDeps: ReadinessDeps = {
  fetch: (url) => fetch(url, { signal: AbortSignal.timeout(5_000) }),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * Polls OpenCode's `/session` until it answers (seed 003 §5 "Reliability": 30 s budget, backoff
 * 200 ms × 1.5 capped at 2 s). The bound is the sum of the sleeps, not a clock read, so tests
 * with an instant `sleep` are deterministic.
 */
export async function waitForOpenCodeReady(baseUrl: string, deps: ReadinessDeps, budgetMs = 30_000): Promise<void> {
  let waited = 0;
  let delay = 200;
  let lastError = "not ready";
  for (;;) {
    try {
      const res = await deps.fetch(`${baseUrl.replace(/\/+$/, "")}/session`);
      if (res.ok) return;
      lastError = "non-2xx response";
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    if (waited >= budgetMs) break;
    await deps.sleep(delay);
    waited += delay;
    delay = Math.min(Math.round(delay * 1.5), 2_000);
  }
  // Named like the SDKs' timeout errors so both providers classify it as transient (retryable).
  const timeout = new Error(`OpenCode did not become ready within ${budgetMs}ms (${lastError})`);
  timeout.name = "TimeoutError";
  throw timeout;
}

/**
 * seed 003 §6.7: on restore from a snapshot, `git pull --ff-only` every repo when the gate says
 * so, and advance `lastGitFetchAt` only when every pull succeeded. Best effort: a failed pull
 * never fails the restore, it just leaves the cadence so the next restore retries.
 */
export async function pullReposOnRestore(
  exec: SandboxExec,
  repos: RepoSpec[],
  config: GitFreshnessConfig,
  now: number,
): Promise<{ pulled: boolean; allSucceeded: boolean }> {
  if (!config.enabled || repos.length === 0) return { pulled: false, allSucceeded: false };
  const read = await exec(["cat", SANDBOX_PATHS.metadata]);
  let metadata: SessionMetadata | null = null;
  try {
    metadata = read.exitCode === 0 ? (JSON.parse(read.stdout) as SessionMetadata) : null;
  } catch {
    metadata = null;
  }
  const pull = shouldPullOnRestore({
    enabled: config.enabled,
    cadenceSeconds: config.cadenceSeconds,
    hasSnapshot: true,
    repoCount: repos.length,
    lastGitFetchAt: metadata?.lastGitFetchAt ?? null,
    now,
  });
  if (!pull) return { pulled: false, allSucceeded: false };
  const results: boolean[] = [];
  for (const repo of repos) {
    const r = await exec(["git", "-C", repoDir(repo), "pull", "--ff-only"]);
    results.push(r.exitCode === 0);
  }
  const allSucceeded = results.every(Boolean);
  if (metadata) {
    const next = metadataAfterPull(metadata, results, now);
    if (next !== metadata) await runBootSequence(exec, [writeFileStep("write metadata", SANDBOX_PATHS.metadata, JSON.stringify(next))]);
  }
  return { pulled: true, allSucceeded };
}
