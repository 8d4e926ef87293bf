/**
 * How the cloud providers (Modal, E2B) boot a sandbox created from the image
 * (sandbox/image/Dockerfile): they hand the image's boot (sandbox/boot, the same boot the
 * local provider runs) a spec with the image's layout, run `boot start` over their exec API,
 * and then wait for OpenCode through their tunnel. Providers differ only in how the spec
 * reaches the sandbox (Modal: stdin; E2B: a file) and in how they exec.
 */
import { BOOT_SPEC_VERSION, type BootSpec } from "../../sandbox/boot/boot-spec";
import { IMAGE_PATHS, IMAGE_PORTS, imageLayout, sandboxFiles } from "../../sandbox/boot/layout";
import { httpProbe, waitUntilReady } from "../../sandbox/boot/readiness";
import { SIDECAR_PROXY_PREFIX } from "../../sandbox/sidecar/caddy-expose";
import { SANDBOX_KEY_ENV } from "../../sandbox/shared/access-token";
import { agentEndpointForKey } from "../agent/agent-endpoint";
import type { GitFreshnessConfig } from "../domain/git-freshness";
import { MODEL_KEY_ENV, modelKeyEnv, modelProvider } from "../domain/agent-settings";
import type { CreateSandboxOpts, ExecResult } from "../ports/sandbox-provider";

/** seed 003 §4 "Standard Ports": OpenCode and preview are HTTPS tunnels, SSH is raw TCP, the sidecar is internal. */
export const SANDBOX_PORTS = IMAGE_PORTS;

/** seed 003 §4 "Sandbox Filesystem Layout", as the image's boot lays it out. */
export const SANDBOX_PATHS = {
  workspace: IMAGE_PATHS.workspace,
  bootEntry: IMAGE_PATHS.bootEntry,
  /** Where E2B writes the boot spec before `boot start` (Modal streams it on stdin). */
  bootRequest: `${sandboxFiles(imageLayout()).stateDir}/boot-request.json`,
  ...sandboxFiles(imageLayout()),
} as const;

export type SandboxExec = (argv: string[], opts?: { cwd?: string; timeoutMs?: number; stdin?: string }) => Promise<ExecResult>;

/**
 * `boot start` waits for clones and readiness itself (boot-plan.ts `phase1DeadlineMs`); this
 * bounds the exec, and so the boot of one provision. 12 minutes, so that the provision step
 * (a Lambda, at most 15) still has time to create the sandbox before it and to terminate it after
 * a failed boot (test/infra/limits.test.ts). A boot whose own clone budget is longer (several
 * large repos) fails here, cleanly, rather than by the Lambda's timeout.
 */
export const BOOT_EXEC_TIMEOUT_MS = 12 * 60_000;

/** POSIX single-quote escaping: the only safe way to put user-provided values in `sh -c`. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(argv: string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : shellQuote(a))).join(" ");
}

/** The deployment's own model variables (its provider secret, or the host env locally). */
export const DEPLOYMENT_MODEL_VARS: readonly string[] = [...new Set([...Object.values(MODEL_KEY_ENV), "ANTHROPIC_BASE_URL"])];

/**
 * What a sandbox gets from the deployment's own model keys: with no model configured (the
 * deployment default) its Anthropic key; with a model named without a key secret, that
 * provider's key; the same for each fallback model's provider (seed 004 failover); nothing for a
 * variable the session's create call already carries (an org secret).
 */
export function deploymentModelEnv(opts: Pick<CreateSandboxOpts, "agentConfig" | "envVars">, deployment: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const modelId = opts.agentConfig?.modelId;
  const keysOf = (id: string) => [modelKeyEnv(id), modelProvider(id) === "anthropic" ? "ANTHROPIC_BASE_URL" : null];
  const wanted = [...(!modelId ? ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] : keysOf(modelId)), ...(opts.agentConfig?.fallbackModelIds ?? []).flatMap(keysOf)];
  const out: Record<string, string> = {};
  for (const name of wanted) {
    const value = name ? deployment[name] : undefined;
    if (name && value && opts.envVars[name] === undefined) out[name] = value;
  }
  return out;
}

/**
 * Env injected into every sandbox: the deployment's model key when the session has none of its
 * own, the session's vars; `SESSION_ID` is set last so a caller cannot spoof it. Never the
 * sandbox key: a container-wide variable is in every process's `/proc/<pid>/environ` (the
 * agent's included); it goes to the boot as a file (`deliverSandboxKey`).
 */
export function buildSandboxEnv(
  opts: Pick<CreateSandboxOpts, "sessionId" | "envVars" | "agentConfig">,
  deployment: Readonly<Record<string, string | undefined>> = {},
): Record<string, string> {
  const { [SANDBOX_KEY_ENV]: _sandboxKey, ...vars } = opts.envVars;
  return { ...deploymentModelEnv(opts, deployment), ...vars, SESSION_ID: opts.sessionId };
}

/**
 * Hands an image sandbox its key before `boot start`: a file (sandbox/shared/sandbox-key-file.ts)
 * the boot reads and removes before it starts any process, then passes to the sidecar on its
 * stdin. `write` is the provider's way to put a file in the sandbox. Nothing to do without a key.
 */
export async function deliverSandboxKey(write: (path: string, content: string) => Promise<void>, opts: Pick<CreateSandboxOpts, "envVars">): Promise<void> {
  const key = sandboxKeyOf(opts);
  if (key) await write(SANDBOX_PATHS.sandboxKey, key);
}

/** A `write` for `deliverSandboxKey` over exec: the content on stdin (never argv), the file mode 0600. */
export function writeFileViaExec(exec: SandboxExec): (path: string, content: string) => Promise<void> {
  return async (path, content) => {
    const dir = path.slice(0, path.lastIndexOf("/")) || "/";
    const r = await exec(["sh", "-c", `umask 077 && mkdir -p ${shellQuote(dir)} && cat > ${shellQuote(path)}`], { stdin: content, timeoutMs: 30_000 });
    if (r.exitCode !== 0) throw new Error(`writing ${path} exited ${r.exitCode}: ${r.stderr.trim().slice(0, 500)}`);
  };
}

/**
 * The env a resumed sandbox re-exports into its shells (E2B resume), written to a file: the
 * session's vars without the sandbox key (only the sidecar may hold it; the sidecar survived the
 * pause with it) and without model keys (OpenCode survived the pause with its own; a key is
 * never written to disk).
 */
export function buildShellEnv(opts: Pick<CreateSandboxOpts, "sessionId" | "envVars">): Record<string, string> {
  const secret = new Set<string>([SANDBOX_KEY_ENV, ...DEPLOYMENT_MODEL_VARS]);
  return Object.fromEntries(Object.entries(buildSandboxEnv(opts)).filter(([name]) => !secret.has(name)));
}

/**
 * What a create call asks the boot for: the same for every provider (the layout differs), so the
 * local provider and the image boot (Modal, E2B) both get the session's env files.
 */
export function bootRequest(opts: CreateSandboxOpts, context: { restored: boolean; now: number; gitFreshness: GitFreshnessConfig | null }): BootSpec["request"] {
  return {
    sessionId: opts.sessionId,
    sessionType: opts.sessionType ?? "coding",
    repos: opts.repos,
    restored: context.restored,
    now: context.now,
    systemPrompt: opts.systemPrompt || null,
    modelId: opts.agentConfig?.modelId ?? null,
    snapshotHasDeps: opts.snapshotHasDeps ?? false,
    serviceCommands: opts.serviceCommands ?? [],
    // Absent unless there are files: the boot adds its `env apply` step only for a spec.
    ...(opts.envFiles && opts.envFiles.length > 0 ? { envFiles: opts.envFiles } : {}),
    sshPublicKey: opts.sshPublicKey ?? null,
    triggerContext: opts.triggerContext ?? null,
    gitFreshness: opts.gitFreshness ?? context.gitFreshness,
    gitIdentity: opts.gitIdentity ?? null,
    controlPlaneUrl: opts.controlPlaneUrl ?? null,
    autoStartServices: opts.autoStartServices ?? false,
  };
}

/**
 * The boot spec of an image sandbox. `restored` means the filesystem came from a session
 * snapshot: repos and metadata are there, processes are not, so the boot skips the clones and
 * starts everything again.
 */
export function imageBootSpec(
  opts: CreateSandboxOpts,
  context: { restored: boolean; now: number; gitFreshness: GitFreshnessConfig | null },
): BootSpec {
  return {
    version: BOOT_SPEC_VERSION,
    request: bootRequest(opts, context),
    layout: imageLayout(),
  };
}

/**
 * The sidecar through the preview tunnel: the image's Caddyfile routes `/_sandbox/sidecar/*`
 * to port 4000 (which no provider tunnels), stripping the prefix.
 */
export function sidecarUrlOnPreview(previewUrl: string | null): string | null {
  return previewUrl ? `${previewUrl.replace(/\/+$/, "")}${SIDECAR_PROXY_PREFIX}` : null;
}

/** `node /opt/sandbox/boot.mjs <mode> --spec <file|->` (sandbox/boot/main.ts). */
export function bootCommand(mode: "start" | "resume", specArg: string): string[] {
  return ["node", SANDBOX_PATHS.bootEntry, mode, "--spec", specArg];
}

/** The boot's own explanation (its last JSON line on stderr), else the raw tail. */
function bootFailure(mode: string, result: ExecResult): Error {
  const lines = result.stderr.trim().split("\n").reverse();
  for (const line of lines) {
    try {
      const parsed = JSON.parse(line) as { error?: unknown };
      if (typeof parsed.error === "string") return new Error(`boot ${mode}: ${parsed.error}`);
    } catch {
      // not a JSON line
    }
  }
  const tail = (result.stderr.trim() || result.stdout.trim()).slice(-800);
  return new Error(`boot ${mode} exited ${result.exitCode}: ${tail}`);
}

/**
 * Runs the image's boot over the provider's exec. `start` returns once phase 1 ended (OpenCode
 * answers inside the sandbox) and throws with the failed step otherwise; the boot keeps running
 * in the sandbox after the exec returns.
 */
export async function runImageBoot(exec: SandboxExec, mode: "start" | "resume", delivery: { stdin: string } | { file: string }): Promise<void> {
  const argv = bootCommand(mode, "stdin" in delivery ? "-" : delivery.file);
  const result = await exec(argv, { timeoutMs: BOOT_EXEC_TIMEOUT_MS, ...("stdin" in delivery ? { stdin: delivery.stdin } : {}) });
  if (result.exitCode !== 0) throw bootFailure(mode, result);
}

export interface ReadinessDeps {
  fetch: (url: string, init?: { headers: Record<string, string> }) => Promise<{ ok: boolean; status?: number }>;
  sleep: (ms: number) => Promise<void>;
}

export const defaultReadinessDeps: ReadinessDeps = {
  fetch: (url, init) => fetch(url, { headers: init?.headers, signal: AbortSignal.timeout(5_000) }),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * Polls OpenCode's `/session` through the tunnel with the boot's readiness backoff (seed 003 §5:
 * 200 ms × 1.5 capped at 2 s, 30 s budget of sleeps). The boot already waited inside the
 * sandbox; this covers the tunnel. A timeout is a `TimeoutError` (transient for both providers).
 *
 * `sandboxKey`: the key the sandbox was created with (its `SIDECAR_TOKEN`); its OpenCode then
 * requires the password derived from it (every route answers 401 without), so the probe sends
 * the matching `Authorization`. Without one, OpenCode runs without a password (old callers).
 */
export async function waitForOpenCodeReady(baseUrl: string, deps: ReadinessDeps, options: { sandboxKey?: string | null; budgetMs?: number } = {}): Promise<void> {
  const { authorization } = agentEndpointForKey(baseUrl, options.sandboxKey);
  const probe = httpProbe(`${baseUrl.replace(/\/+$/, "")}/session`, deps.fetch, authorization ? { authorization } : undefined);
  await waitUntilReady(probe, { sleep: deps.sleep, budgetMs: options.budgetMs ?? 30_000, what: "OpenCode" });
}

/** The sandbox key a create call hands its sandbox (`SIDECAR_TOKEN` in its env vars), if any. */
export function sandboxKeyOf(opts: Pick<CreateSandboxOpts, "envVars">): string | null {
  return opts.envVars[SANDBOX_KEY_ENV] || null;
}
