/**
 * How a local sandbox is booted: the boot spec (sandbox/boot, the same boot the image runs)
 * with a per-sandbox layout, and the environment of the boot process. Pure functions over plain
 * data, so the provider only does I/O. Facts about OpenCode 1.18 checked offline on this
 * machine: without unreachable npm/bun registries it quietly installs a ~63 MB plugin package,
 * without `OPENCODE_DISABLE_MODELS_FETCH` it fetches the models catalogue, and it stores
 * sessions in SQLite (`$XDG_DATA_HOME/opencode/opencode.db`, WAL mode).
 */
import type { GitFreshnessConfig } from "../../domain/git-freshness";
import type { CreateSandboxOpts } from "../../ports/sandbox-provider";
import { BOOT_SPEC_VERSION, type BootSpec } from "../../../sandbox/boot/boot-spec";
import { homeEnv } from "../../../sandbox/boot/layout";
import { bootRequest } from "../sandbox-boot";

export { homeEnv };

/** Where every unwanted package download goes: a port nothing listens on. */
const UNREACHABLE_REGISTRY = "http://127.0.0.1:9/";

export interface SandboxPaths {
  root: string;
  workspace: string;
  home: string;
}

export function sandboxPaths(dataDir: string, sandboxId: string): SandboxPaths {
  const root = `${dataDir}/sandboxes/${sandboxId}`;
  return { root, workspace: `${root}/workspace`, home: `${root}/home` };
}

/** Path of OpenCode's session database inside a sandbox (or snapshot) home. */
export function openCodeDbPath(home: string): string {
  return `${home}/.local/share/opencode/opencode.db`;
}

/** The real model when an Anthropic key is configured, else the development model. */
export function usesDevModel(providerEnv: Record<string, string>): boolean {
  return !providerEnv.ANTHROPIC_API_KEY;
}

/** The provider env keys that reach the agent (never the whole host environment). */
const AGENT_KEYS = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] as const;

/**
 * The boot process's environment (its children inherit it): a minimal host base (so host
 * credentials do not leak in), the sandbox home, the session's own vars, the agent's key, and
 * OpenCode's offline switches. The boot adds `OPENCODE_CONFIG_CONTENT` for OpenCode itself.
 */
export function sandboxEnv(input: {
  hostPath: string;
  home: string;
  sessionId: string;
  sandboxId: string;
  providerEnv: Record<string, string>;
  envVars: Record<string, string>;
}): Record<string, string> {
  const agent: Record<string, string> = {};
  for (const key of AGENT_KEYS) {
    const value = input.providerEnv[key];
    if (value) agent[key] = value;
  }
  return {
    PATH: input.hostPath,
    LANG: "C.UTF-8",
    ...homeEnv(input.home),
    ...input.envVars,
    ...agent,
    SESSION_ID: input.sessionId,
    SANDBOX_ID: input.sandboxId,
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    OPENCODE_DISABLE_SHARE: "1",
    OPENCODE_DISABLE_CLAUDE_CODE: "1",
    npm_config_registry: UNREACHABLE_REGISTRY,
    NPM_CONFIG_REGISTRY: UNREACHABLE_REGISTRY,
    BUN_CONFIG_REGISTRY: UNREACHABLE_REGISTRY,
  };
}

export interface LocalBootInput {
  opts: CreateSandboxOpts;
  paths: SandboxPaths;
  /** Restored from a session snapshot (not a base layer): repos are already in the workspace. */
  restored: boolean;
  now: number;
  repoRoot: string;
  /** `node --import <tsx>`: how TypeScript entries (sidecar, CLI) run on a host. */
  node: { bin: string; tsxLoaderUrl: string };
  opencodeBin: string;
  openCodePort: number;
  devModelPort: number | null;
  sidecarPort: number | null;
  readinessBudgetMs: number;
  timeoutSeconds: number;
  gitFreshness: GitFreshnessConfig | null;
}

/** The boot spec of a local sandbox: the request from the create call, a layout under the sandbox root. */
export function localBootSpec(input: LocalBootInput): BootSpec {
  const { opts, paths, node, repoRoot } = input;
  const tsEntry = (path: string) => ({ argv: [node.bin, "--import", node.tsxLoaderUrl, path], requires: path });
  return {
    version: BOOT_SPEC_VERSION,
    request: bootRequest(opts, input),
    layout: {
      home: paths.home,
      workspace: paths.workspace,
      logDir: paths.root,
      opencode: { bin: input.opencodeBin, port: input.openCodePort, hostname: "127.0.0.1" },
      readinessBudgetMs: input.readinessBudgetMs,
      toolModules: `${repoRoot}/node_modules`,
      devModel: input.devModelPort === null ? null : { port: input.devModelPort },
      caddy: null,
      sidecar: input.sidecarPort === null ? null : { command: tsEntry(`${repoRoot}/sandbox/sidecar/main.ts`), host: "127.0.0.1", port: input.sidecarPort },
      cli: tsEntry(`${repoRoot}/sandbox/cli/main.ts`),
      servicesScript: null,
      expiresInSeconds: input.timeoutSeconds,
    },
  };
}
