/**
 * The files the boot writes for OpenCode (seed 003 §2 "OpenCode Plugin", §6.4 phase 1 step 2):
 * config, plugin, agent tools, and the package files that tell OpenCode its config dir's
 * dependencies are installed. Pure strings and objects; they are also the inputs of the image's
 * version key (sandbox/image/version-key.ts), so any change here makes base snapshots stale.
 *
 * Facts about OpenCode 1.18 (checked against the pinned binary):
 * - every config dir is scanned for `plugin/*.{js,ts}` and `{tool,tools}/*.{js,ts}`; a tool
 *   file's default export `{description, args, execute}` becomes a tool named after the file;
 * - for every config dir OpenCode installs `@opencode-ai/plugin` with npm unless the dir has a
 *   `node_modules/` and a `package-lock.json` listing every `package.json` dependency; plugins
 *   wait for that install, which takes minutes offline. `configDirPackageFiles` satisfies the
 *   check, so nothing is ever downloaded at boot;
 * - `OPENCODE_CONFIG_CONTENT` is merged after project configs, so it wins over a repo's own
 *   `opencode.json`.
 */
import type { SessionType } from "../../functions/domain/session";

/** The OpenCode release the image installs and the control plane is tested with (package.json `opencode-ai`). */
export const OPENCODE_VERSION = "1.18.33";
/** Used when the session names no model and no development model runs. */
export const DEFAULT_MODEL_ID = "anthropic/claude-sonnet-4-5";
export const DEV_MODEL = { provider: "dev", model: "echo" } as const;
/** The development model's second model (sandbox/dev-model `echo-backup`): a failover target. */
export const DEV_BACKUP_MODEL = "echo-backup";

/** The development model's key variable (domain/agent-settings.ts MODEL_KEY_ENV `dev`). */
export const DEV_MODEL_KEY_ENV = "DEV_MODEL_API_KEY";

/** `apiKeyEnv`: OpenCode sends that variable's value as the development model's key; null sends "dev". */
export type ModelChoice = { kind: "dev"; port: number; apiKeyEnv?: string | null } | { kind: "id"; modelId: string };

export function openCodeConfig(input: { model: ModelChoice; instructionsPath: string | null }): Record<string, unknown> {
  const base: Record<string, unknown> = {
    $schema: "https://opencode.ai/config.json",
    autoupdate: false,
    share: "disabled",
    ...(input.instructionsPath ? { instructions: [input.instructionsPath] } : {}),
  };
  if (input.model.kind === "id") return { ...base, model: input.model.modelId, small_model: input.model.modelId };
  const id = `${DEV_MODEL.provider}/${DEV_MODEL.model}`;
  return {
    ...base,
    provider: {
      [DEV_MODEL.provider]: {
        // Bundled with OpenCode: no download.
        npm: "@ai-sdk/openai-compatible",
        name: DEV_MODEL.provider,
        // `{env:NAME}`: OpenCode substitutes the variable, so the key is never in this config or its file.
        options: { baseURL: `http://127.0.0.1:${input.model.port}/v1`, apiKey: input.model.apiKeyEnv ? `{env:${input.model.apiKeyEnv}}` : "dev" },
        models: { [DEV_MODEL.model]: { name: DEV_MODEL.model, tool_call: true }, [DEV_BACKUP_MODEL]: { name: DEV_BACKUP_MODEL, tool_call: true } },
      },
    },
    model: id,
    small_model: id,
  };
}

/**
 * seed 003 §2: a minimal ESM plugin with empty hooks. Events reach the control plane through
 * OpenCode's SSE stream, which the relay pulls; the plugin pushes nothing.
 */
export const PLUGIN_SOURCE = `// Written by the sandbox boot (sandbox/boot/opencode-files.ts). Deliberately empty hooks:
// the control plane reads every event from OpenCode's SSE stream.
export const SandboxPlugin = async () => ({});
`;

export interface AgentTool {
  name: string;
  /** Only sessions of this type get the tool (seed 003 §6.4: setup-only tools). */
  setupOnly: boolean;
  source: string;
}

/**
 * A tool the control plane acts on: the sandbox side only validates the arguments and
 * acknowledges; the relay sees the completed call (name + input) in the SSE stream.
 */
function controlPlaneTool(name: string, description: string, args: string): string {
  return `// Written by the sandbox boot (sandbox/boot/opencode-files.ts); the control plane acts on calls to this tool.
import * as z from "zod";

export default {
  description: ${JSON.stringify(description)},
  args: {${args}},
  async execute(args) {
    return JSON.stringify({ tool: ${JSON.stringify(name)}, status: "requested", request: args });
  },
};
`;
}

const KEY_FIELDS = `name: z.string().min(1).describe("Environment variable name"), required: z.boolean().optional().describe("Whether the value must be provided (default true)")`;

export const AGENT_TOOLS: readonly AgentTool[] = [
  {
    name: "verify",
    setupOnly: false,
    source: controlPlaneTool(
      "verify",
      "Ask for your work to be verified. Put evidence (screenshots, logs, test output) in a folder of the workspace and pass it; the result is reported to the user.",
      `\n    folder: z.string().optional().describe("Workspace-relative folder holding the evidence"),\n  `,
    ),
  },
  {
    name: "save_snapshot",
    setupOnly: false,
    source: controlPlaneTool(
      "save_snapshot",
      "Save a snapshot of this sandbox (files, installed dependencies, agent history) so later sessions start from it.",
      `\n    message: z.string().optional().describe("What the snapshot contains"),\n  `,
    ),
  },
  {
    name: "request_env_variables",
    setupOnly: false,
    source: controlPlaneTool(
      "request_env_variables",
      "Ask the user for environment variables (secrets, configuration) this task needs. The values are provided to the sandbox; never ask for them in chat.",
      `\n    keys: z.array(z.object({ ${KEY_FIELDS}, description: z.string().optional() })).min(1),\n  `,
    ),
  },
  {
    name: "save_service_commands",
    setupOnly: true,
    source: controlPlaneTool(
      "save_service_commands",
      "Save the commands that start this project's services (dev servers, databases). Sessions started from this setup run them on boot.",
      `\n    commands: z.array(z.object({ name: z.string().min(1), command: z.string().min(1), cwd: z.string().optional() })).min(1),\n  `,
    ),
  },
  {
    name: "save_env_files",
    setupOnly: true,
    source: controlPlaneTool(
      "save_env_files",
      "Save which env files this project needs (path, format, keys). Sessions started from this setup generate them on boot from the provided values.",
      `\n    files: z.array(z.object({ path: z.string().min(1), format: z.enum(["dotenv", "json"]).optional(), keys: z.array(z.object({ ${KEY_FIELDS} })).min(1) })).min(1),\n  `,
    ),
  },
];

/** The tools a session gets: setup-only tools only for setup sessions (seed 003 §6.4 step 2). */
export function toolsFor(sessionType: SessionType): AgentTool[] {
  return AGENT_TOOLS.filter((t) => !t.setupOnly || sessionType === "setup");
}

/** Makes OpenCode's dependency check pass for a config dir (see the header). */
export function configDirPackageFiles(): { packageJson: string; packageLock: string } {
  const dependencies = { "@opencode-ai/plugin": OPENCODE_VERSION };
  return {
    packageJson: `${JSON.stringify({ private: true, dependencies }, null, 2)}\n`,
    packageLock: `${JSON.stringify({ lockfileVersion: 3, requires: true, packages: { "": { dependencies } } }, null, 2)}\n`,
  };
}
