/**
 * What a local sandbox runs and with which environment: pure functions over plain data, so the
 * provider only does I/O. Facts about OpenCode 1.18 checked offline on this machine:
 * - config comes through `OPENCODE_CONFIG_CONTENT` (JSON);
 * - an `@ai-sdk/openai-compatible` provider block needs no download (it is bundled);
 * - without unreachable npm/bun registries it quietly installs a ~63 MB plugin package, and
 *   without `OPENCODE_DISABLE_MODELS_FETCH` it fetches the models catalogue;
 * - it stores sessions in SQLite (`$XDG_DATA_HOME/opencode/opencode.db`, WAL mode).
 */

/** Where every unwanted package download goes: a port nothing listens on. */
const UNREACHABLE_REGISTRY = "http://127.0.0.1:9/";
const DEFAULT_ANTHROPIC_MODEL = "anthropic/claude-sonnet-4-5";

export interface SandboxPaths {
  root: string;
  workspace: string;
  home: string;
}

export function sandboxPaths(dataDir: string, sandboxId: string): SandboxPaths {
  const root = `${dataDir}/sandboxes/${sandboxId}`;
  return { root, workspace: `${root}/workspace`, home: `${root}/home` };
}

/** The agent's whole state (config, SQLite history, caches) lives under `home/`. */
export function homeEnv(home: string): Record<string, string> {
  return {
    HOME: home,
    XDG_CONFIG_HOME: `${home}/.config`,
    XDG_DATA_HOME: `${home}/.local/share`,
    XDG_STATE_HOME: `${home}/.local/state`,
    XDG_CACHE_HOME: `${home}/.cache`,
  };
}

/** Path of OpenCode's session database inside a sandbox (or snapshot) home. */
export function openCodeDbPath(home: string): string {
  return `${home}/.local/share/opencode/opencode.db`;
}

export type AgentModel = { kind: "dev"; devModelPort: number } | { kind: "anthropic"; modelId: string };

/** Picks the model: the real one when an Anthropic key is configured, else the development model. */
export function chooseModel(providerEnv: Record<string, string>, modelId: string | undefined, devModelPort: number): AgentModel {
  if (providerEnv.ANTHROPIC_API_KEY) return { kind: "anthropic", modelId: modelId ?? DEFAULT_ANTHROPIC_MODEL };
  return { kind: "dev", devModelPort };
}

export function openCodeConfig(model: AgentModel, instructionsPath: string | null): Record<string, unknown> {
  const base: Record<string, unknown> = {
    autoupdate: false,
    share: "disabled",
    ...(instructionsPath ? { instructions: [instructionsPath] } : {}),
  };
  if (model.kind === "anthropic") return { ...base, model: model.modelId, small_model: model.modelId };
  return {
    ...base,
    provider: {
      dev: {
        npm: "@ai-sdk/openai-compatible",
        name: "dev",
        options: { baseURL: `http://127.0.0.1:${model.devModelPort}/v1`, apiKey: "dev" },
        models: { echo: { name: "echo", tool_call: true } },
      },
    },
    model: "dev/echo",
    small_model: "dev/echo",
  };
}

/** The provider env keys that reach the agent (never the whole host environment). */
const AGENT_KEYS = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] as const;

/**
 * The sandbox environment: a minimal host base (so host credentials do not leak in), the
 * sandbox home, OpenCode's offline switches, the agent's key, then the session's own vars.
 */
export function sandboxEnv(input: {
  hostPath: string;
  home: string;
  sessionId: string;
  sandboxId: string;
  providerEnv: Record<string, string>;
  envVars: Record<string, string>;
  config: Record<string, unknown>;
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
    OPENCODE_CONFIG_CONTENT: JSON.stringify(input.config),
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

/**
 * The process-group leader script. Positional args keep launcher details out of the agent's
 * environment. The dev model starts first (same group, so terminate kills it too); the watchdog
 * enforces the sandbox timeout from inside the group, so expiry holds even when no provider
 * process is running; `exec` makes OpenCode the leader, so leader alive == sandbox alive.
 */
export const LAUNCH_SCRIPT = [
  'if [ -n "$3" ]; then "$1" --import "$2" "$3" --port "$4" & fi',
  'if [ -n "$5" ]; then (sleep "$5"; kill -TERM 0) & fi',
  'exec "$6" serve --port "$7" --hostname 127.0.0.1',
].join("\n");

export function launchArgs(input: {
  nodeBin: string;
  tsxLoaderUrl: string;
  devModelMain: string | null;
  devModelPort: number;
  timeoutSeconds: number | null;
  opencodeBin: string;
  opencodePort: number;
}): string[] {
  return [
    "-c",
    LAUNCH_SCRIPT,
    "sandbox-launch",
    input.nodeBin,
    input.tsxLoaderUrl,
    input.devModelMain ?? "",
    String(input.devModelPort),
    input.timeoutSeconds === null ? "" : String(input.timeoutSeconds),
    input.opencodeBin,
    String(input.opencodePort),
  ];
}

const OPENCODE_READY = /opencode server listening on (http:\/\/[^\s]+)/;
const DEV_MODEL_READY = /dev-model listening on (http:\/\/[^\s]+)/;

/** Readiness from the sandbox log: OpenCode's URL once it listens (and the dev model too, when used). */
export function readinessFromLog(log: string, needsDevModel: boolean): { openCodeUrl: string } | null {
  const oc = OPENCODE_READY.exec(log);
  if (!oc?.[1]) return null;
  if (needsDevModel && !DEV_MODEL_READY.test(log)) return null;
  return { openCodeUrl: oc[1].replace(/\/$/, "") };
}

/** Directory name for a cloned repo: `workspacePath`, else the URL's last segment without `.git`. */
export function repoDirName(url: string, workspacePath?: string): string {
  if (workspacePath) return workspacePath;
  const last = url.replace(/[/\\]+$/, "").split(/[/\\:]/).pop() ?? "repo";
  return last.replace(/\.git$/, "") || "repo";
}
