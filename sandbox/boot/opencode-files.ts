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
 * What every tool file shares: one call of the sidecar's Unix socket (`SIDECAR_SOCKET`, in
 * OpenCode's environment; sandbox/sidecar/socket-api.ts), which signs the control plane call with
 * the sandbox key the agent never holds. A 4xx or 503 answer becomes the tool's error, with the
 * message that names the field or the state, so the model can correct its call.
 */
const SIDECAR_CALL = `import { request } from "node:http";

function callSidecarOnce(socketPath, route, payload, signal) {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, path: route, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }, signal },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => {
          let answer = null;
          try { answer = JSON.parse(text); } catch {}
          if (res.statusCode >= 200 && res.statusCode < 300) resolve(answer);
          else reject(new Error(answer?.error?.message ?? "the sidecar answered " + res.statusCode));
        });
      },
    );
    req.on("error", (err) => reject(Object.assign(new Error("the sidecar is unreachable: " + (err.code ?? err.message)), { connect: err.code === "ENOENT" || err.code === "ECONNREFUSED" })));
    req.end(payload);
  });
}

// The sidecar starts in the boot's second phase, beside the agent: a call in the first seconds
// waits for its socket (up to 30 s, the boot's readiness budget).
async function callSidecar(route, body, signal) {
  const socketPath = process.env.SIDECAR_SOCKET;
  if (!socketPath) throw new Error("this sandbox has no sidecar socket (SIDECAR_SOCKET is not set): the control plane cannot be reached");
  const payload = JSON.stringify(body);
  const deadline = Date.now() + 30000;
  for (let wait = 200; ; wait = Math.min(2000, wait * 1.5)) {
    try {
      return await callSidecarOnce(socketPath, route, payload, signal);
    } catch (err) {
      if (!err.connect || Date.now() + wait > deadline || signal?.aborted) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
`;

/** A tool file: its arguments (zod, as OpenCode reads them) and the body of `execute(args, context)`. */
function sidecarTool(description: string, args: string, execute: string): string {
  return `// Written by the sandbox boot (sandbox/boot/opencode-files.ts): the sidecar forwards this tool to the control plane.
import * as z from "zod";
${SIDECAR_CALL}
export default {
  description: ${JSON.stringify(description)},
  args: {${args}},
  async execute(args, context) {
${execute}
  },
};
`;
}

const KEY_NAME = `z.string().min(1).max(128).describe("Environment variable name")`;

export const AGENT_TOOLS: readonly AgentTool[] = [
  {
    name: "verify",
    setupOnly: false,
    source: sidecarTool(
      "Report your work to the user for review. Put evidence (screenshots, logs, test output) in a workspace folder and pass it with a short summary: the user is shown the summary, the list of evidence files (names and sizes; their contents stay in this sandbox, where the user can open them) and the state of the session's services. This runs no tests itself: run them first.",
      `\n    folder: z.string().max(1024).optional().describe("Workspace-relative folder holding the evidence"),\n    summary: z.string().max(4000).optional().describe("What you did and how you checked it"),\n  `,
      `    const r = await callSidecar("/agent/verify", args, context?.abort);
    const report = r.report;
    const files = report.files.map((f) => f.path + " (" + f.bytes + " bytes)");
    const services = report.services.map((s) => s.name + " " + s.status + (s.exitCode === null ? "" : " (exit " + s.exitCode + ")"));
    return [
      "Reported to the user for review (verification " + r.verification?.id + ").",
      report.folder ? "Evidence in " + report.folder + ": " + (files.length ? files.join(", ") + (report.truncated ? " and more" : "") : "no files") + "." : "No evidence folder was given.",
      "Services: " + (services.length ? services.join(", ") : "none") + ".",
    ].join(" ");`,
    ),
  },
  {
    name: "save_snapshot",
    setupOnly: false,
    source: sidecarTool(
      "Save a snapshot of this sandbox (files, installed dependencies, agent history): resuming this session restores it. Waits until the snapshot is committed (up to 2 minutes) and returns its id.",
      `\n    message: z.string().max(500).optional().describe("What the snapshot contains"),\n  `,
      `    const r = await callSidecar("/agent/save-snapshot", args.message ? { message: args.message } : {}, context?.abort);
    if (r.status === "committed") return "Snapshot saved: " + r.snapshotId;
    if (r.status === "pending") return "The snapshot is still being taken (flow " + r.execution + "); it is recorded on the session when it completes. Do not call save_snapshot again for it.";
    throw new Error("The snapshot was not saved (" + r.status + ")" + (r.message ? ": " + r.message : ""));`,
    ),
  },
  {
    name: "request_env_variables",
    setupOnly: false,
    source: sidecarTool(
      "Ask the user for environment variables (secrets, configuration) this task needs. The user is shown the request and stores each value as an organization secret of that name; values never pass through the chat, so never ask for them there. Returns which keys are already available.",
      `\n    keys: z.array(z.object({ name: ${KEY_NAME}, required: z.boolean().optional().describe("Whether the task cannot run without it (default true)"), description: z.string().max(500).optional().describe("What the value is for") })).min(1).max(50),\n    reason: z.string().max(1000).optional().describe("Why the task needs them"),\n  `,
      `    const r = await callSidecar("/agent/env-request", args, context?.abort);
    const keys = r.envRequest.keys;
    const missing = keys.filter((k) => !k.available).map((k) => k.name);
    const available = keys.filter((k) => k.available).map((k) => k.name);
    return [
      missing.length ? "Asked the user for " + missing.join(", ") + " (request " + r.envRequest.id + "); they will store the values as organization secrets." : "Nothing to ask: every key is already an organization secret.",
      available.length ? "Already available as organization secrets: " + available.join(", ") + "." : "",
      "Values reach this sandbox through the session's env files (save_env_files in a setup session) when they are generated at boot. Do not wait for them: go on with what you can do.",
    ].filter(Boolean).join(" ");`,
    ),
  },
  {
    name: "save_service_commands",
    setupOnly: true,
    source: sidecarTool(
      "Save the commands that start this project's services (dev servers, databases). They are saved on this session, replacing earlier ones: every later boot of the session defines and starts them.",
      `\n    commands: z.array(z.object({ name: z.string().min(1).max(63).describe("Service name: letters, digits, '.', '_' or '-'"), command: z.string().min(1).max(8192), cwd: z.string().max(1024).optional().describe("Workspace-relative directory") })).min(1).max(20),\n  `,
      `    const r = await callSidecar("/agent/service-commands", args, context?.abort);
    return "Saved " + r.serviceCommands.length + " service command(s) (" + r.serviceCommands.map((c) => c.name).join(", ") + ") to the " + r.savedTo.join(" and ") + ": they start at every boot from now on.";`,
    ),
  },
  {
    name: "save_env_files",
    setupOnly: true,
    source: sidecarTool(
      "Save which env files this project needs (workspace-relative path, format, key names; never values). They are saved on this session, replacing earlier ones: every later boot generates them from the organization's secrets of those names.",
      `\n    files: z.array(z.object({ path: z.string().min(1).max(1024), format: z.enum(["dotenv", "json"]).optional(), keys: z.array(z.object({ name: ${KEY_NAME}, required: z.boolean().optional().describe("Whether the value must be provided (default true)") })).min(1).max(200) })).min(1).max(50),\n  `,
      `    const r = await callSidecar("/agent/env-files", args, context?.abort);
    return "Saved " + r.envFiles.length + " env file(s) (" + r.envFiles.map((f) => f.path).join(", ") + ") to the " + r.savedTo.join(" and ") + ": they are generated at every boot from now on.";`,
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
