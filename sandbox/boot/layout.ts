/**
 * Where things live inside a sandbox (seed 003 §4 "Sandbox Filesystem Layout", "Standard
 * Ports"). The image has one fixed layout (`imageLayout()`); the local provider builds one per
 * sandbox (its own directories, allocated ports). Everything else is derived from the layout by
 * `sandboxFiles`, so the boot, the providers and the tests agree on every path. Pure.
 */
import type { RepoSpec } from "../../functions/domain/session";
import { OutsideWorkspaceError, resolveInsideWorkspaceLexically } from "../shared/workspace-path";
import type { BootLayout } from "./boot-spec";

/** seed 003 §4 "Standard Ports"; Caddy's admin API is loopback-only (the sidecar uses it). */
export const IMAGE_PORTS = { opencode: 4096, preview: 20000, sidecar: 4000, ssh: 22, caddyAdmin: 2019 } as const;
/** What the image declares (Caddy's admin API stays on loopback). */
export const IMAGE_EXPOSED_PORTS = [IMAGE_PORTS.opencode, IMAGE_PORTS.preview, IMAGE_PORTS.sidecar, IMAGE_PORTS.ssh] as const;

/** Paths baked into the image (sandbox/image/Dockerfile installs to these). */
export const IMAGE_PATHS = {
  home: "/home/user",
  workspace: "/home/user/workspace",
  /** Bundled boot, sidecar and CLI, plus their runtime `node_modules`. */
  install: "/opt/sandbox",
  bootEntry: "/opt/sandbox/boot.mjs",
  sidecarEntry: "/opt/sandbox/sidecar.mjs",
  cliEntry: "/opt/sandbox/cli.mjs",
  caddyfile: "/etc/sandbox/Caddyfile",
  startServices: "/usr/local/bin/start-services.sh",
  logDir: "/tmp/sandbox",
} as const;

/** The layout of every sandbox started from the image (Modal, E2B). */
export function imageLayout(): BootLayout {
  return {
    home: IMAGE_PATHS.home,
    workspace: IMAGE_PATHS.workspace,
    logDir: IMAGE_PATHS.logDir,
    opencode: { bin: "opencode", port: IMAGE_PORTS.opencode, hostname: "0.0.0.0" },
    readinessBudgetMs: 30_000,
    toolModules: `${IMAGE_PATHS.install}/node_modules`,
    devModel: null,
    caddy: { bin: "caddy", caddyfile: IMAGE_PATHS.caddyfile, adminUrl: `http://127.0.0.1:${IMAGE_PORTS.caddyAdmin}` },
    sidecar: {
      command: { argv: ["node", IMAGE_PATHS.sidecarEntry], requires: IMAGE_PATHS.sidecarEntry },
      host: "127.0.0.1",
      port: IMAGE_PORTS.sidecar,
      socket: `${IMAGE_PATHS.logDir}/sidecar.sock`,
    },
    cli: { argv: ["node", IMAGE_PATHS.cliEntry], requires: IMAGE_PATHS.cliEntry },
    servicesScript: IMAGE_PATHS.startServices,
    expiresInSeconds: null,
  };
}

export interface SandboxFiles {
  /** OpenCode's global config dir: config, plugin, tools and instructions all live here, never in a repo. */
  opencodeConfigDir: string;
  opencodeConfig: string;
  plugin: string;
  toolDir: string;
  instructions: string;
  /** The boot's own state (seed 003 `.proliferate/`). */
  stateDir: string;
  metadata: string;
  bootSpec: string;
  servicesFile: string;
  envSpec: string;
  sidecarState: string;
  triggerContext: string;
  authorizedKeys: string;
  /**
   * The sandbox key, as the provider delivers it (mode 0600): the boot reads it and removes it
   * before it starts anything (issue 14 §2), so it is never in an environment or a snapshot.
   */
  sandboxKey: string;
  /** The boot's git config (identity, credential helper); rewritten at every boot. */
  gitConfig: string;
  /**
   * seed 003 §6.3: env vars re-injected on resume, read by the CLI's `env apply`. Per sandbox,
   * under its home (the seed's `/tmp/.proliferate_env.json` would be shared by every local
   * sandbox on a host, and world-readable).
   */
  envJson: string;
  envProfile: string;
}

export function sandboxFiles(layout: Pick<BootLayout, "home" | "workspace">): SandboxFiles {
  const configDir = `${layout.home}/.config/opencode`;
  const stateDir = `${layout.home}/.proliferate`;
  return {
    opencodeConfigDir: configDir,
    opencodeConfig: `${configDir}/opencode.json`,
    plugin: `${configDir}/plugin/sandbox.js`,
    toolDir: `${configDir}/tool`,
    instructions: `${configDir}/instructions.md`,
    stateDir,
    metadata: `${stateDir}/metadata.json`,
    bootSpec: `${stateDir}/boot-spec.json`,
    servicesFile: `${stateDir}/services.json`,
    envSpec: `${stateDir}/env-spec.json`,
    sidecarState: `${stateDir}/sidecar`,
    triggerContext: `${layout.workspace}/.proliferate/trigger-context.json`,
    authorizedKeys: `${layout.home}/.ssh/authorized_keys`,
    sandboxKey: `${stateDir}/sandbox-key`,
    gitConfig: `${layout.home}/.gitconfig`,
    envJson: `${stateDir}/env.json`,
    envProfile: `${layout.home}/.env.proliferate`,
  };
}

/** The agent's whole state (config, SQLite history, caches) lives under the sandbox home. */
export function homeEnv(home: string): Record<string, string> {
  return {
    HOME: home,
    XDG_CONFIG_HOME: `${home}/.config`,
    XDG_DATA_HOME: `${home}/.local/share`,
    XDG_STATE_HOME: `${home}/.local/state`,
    XDG_CACHE_HOME: `${home}/.cache`,
  };
}

/** Directory name of a repo: `workspacePath`, else the URL's last segment without `.git`. */
export function repoDirName(url: string, workspacePath?: string): string {
  if (workspacePath) return workspacePath;
  const last = url.replace(/[/\\]+$/, "").split(/[/\\:]/).pop() ?? "repo";
  return last.replace(/\.git$/, "") || "repo";
}

export class WorkspacePathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WorkspacePathError";
  }
}

/** Where a repo is cloned ("." is the workspace itself); a path leaving the workspace is refused. */
export function repoDir(workspace: string, repo: Pick<RepoSpec, "url" | "workspacePath">): string {
  const name = repoDirName(repo.url, repo.workspacePath);
  try {
    return resolveInsideWorkspaceLexically(workspace, name);
  } catch (err) {
    if (err instanceof OutsideWorkspaceError) throw new WorkspacePathError(`repo path ${JSON.stringify(name)} leaves the workspace`);
    throw err;
  }
}
