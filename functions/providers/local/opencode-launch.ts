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
import { bootRequest, buildSandboxEnv } from "../sandbox-boot";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { modelProvider } from "../../domain/agent-settings";
import { DEV_MODEL } from "../../../sandbox/boot/opencode-files";

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

/**
 * The sidecar's Unix socket of a local sandbox: in the OS temp dir, not under the data dir,
 * because a socket path must fit in 108 bytes and DATA_DIR may be long.
 */
export function sidecarSocketPath(sandboxId: string): string {
  return join(tmpdir(), `scp-${sandboxId}.sock`);
}

/** Path of OpenCode's session database inside a sandbox (or snapshot) home. */
export function openCodeDbPath(home: string): string {
  return `${home}/.local/share/opencode/opencode.db`;
}

/**
 * Host env (tests): the development model refuses requests whose key is not this one, so a test
 * proves the session's model key reached OpenCode. Only its SHA-256 enters the boot spec.
 */
export const DEV_MODEL_REQUIRED_KEY_ENV = "DEV_MODEL_REQUIRED_KEY";

/**
 * The development model runs when the session names it (`dev/...`), or names no model and the
 * deployment has no Anthropic key; otherwise the real model the session resolved to.
 */
export function usesDevModel(opts: Pick<CreateSandboxOpts, "agentConfig">, providerEnv: Record<string, string>): boolean {
  const modelId = opts.agentConfig?.modelId;
  if (modelId) return modelProvider(modelId) === DEV_MODEL.provider;
  return !providerEnv.ANTHROPIC_API_KEY;
}

export function devModelRequiredKeySha256(providerEnv: Record<string, string>): string | null {
  const key = providerEnv[DEV_MODEL_REQUIRED_KEY_ENV];
  return key ? createHash("sha256").update(key, "utf8").digest("hex") : null;
}

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
  opts: Pick<CreateSandboxOpts, "sessionId" | "envVars" | "agentConfig">;
}): Record<string, string> {
  return {
    PATH: input.hostPath,
    LANG: "C.UTF-8",
    ...homeEnv(input.home),
    // The session's vars and its model key, else the deployment's (the same rule as Modal and E2B).
    ...buildSandboxEnv(input.opts, input.providerEnv),
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
  /** SHA-256 of the key the development model requires (DEV_MODEL_REQUIRED_KEY), or null. */
  devModelRequiredKeySha256?: string | null;
  sidecarPort: number | null;
  /** The sidecar's in-sandbox Unix socket (short: sun_path holds 108 bytes). */
  sidecarSocket?: string | null;
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
      devModel: input.devModelPort === null ? null : { port: input.devModelPort, requiredKeySha256: input.devModelRequiredKeySha256 ?? null },
      caddy: null,
      sidecar:
        input.sidecarPort === null
          ? null
          : { command: tsEntry(`${repoRoot}/sandbox/sidecar/main.ts`), host: "127.0.0.1", port: input.sidecarPort, socket: input.sidecarSocket ?? null },
      cli: tsEntry(`${repoRoot}/sandbox/cli/main.ts`),
      servicesScript: null,
      expiresInSeconds: input.timeoutSeconds,
    },
  };
}
