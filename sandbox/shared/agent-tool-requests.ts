/**
 * The agent's own tools (issue 25 §4) as requests: what OpenCode's tool files send the sidecar
 * over its Unix socket, and what the sidecar forwards to the control plane. The sandbox is
 * untrusted (the agent can call the socket itself), so the sidecar checks these shapes and the
 * control plane checks them again with the session rules on top (functions/agent-tools/).
 * Every field is bounded; names and paths are single printable lines.
 */
import * as z from "zod";

/** Single printable line: no control characters (the agent's text reaches every client of the session). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const line = (max: number) =>
  z
    .string()
    .min(1)
    .max(max, `must be at most ${max} characters`)
    .refine((v) => !CONTROL.test(v), "must be one printable line");

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const MAX_REQUESTED_ENV_KEYS = 50;
export const MAX_AGENT_SERVICE_COMMANDS = 20;
export const MAX_AGENT_ENV_FILES = 50;
export const MAX_AGENT_ENV_FILE_KEYS = 200;

const EnvKeyName = z.string().min(1).max(128, "must be at most 128 characters").regex(ENV_NAME, "must be an environment variable name");

export const SaveSnapshotRequest = z.object({ message: line(500).optional() }).strict();
export type SaveSnapshotRequest = z.infer<typeof SaveSnapshotRequest>;

export const AgentServiceCommand = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "must be 1-63 letters, digits, '.', '_' or '-'"),
    command: z.string().min(1).max(8_192, "must be at most 8192 characters"),
    cwd: line(1024).optional(),
  })
  .strict();

export const SaveServiceCommandsRequest = z
  .object({
    commands: z
      .array(AgentServiceCommand)
      .min(1)
      .max(MAX_AGENT_SERVICE_COMMANDS, `must list at most ${MAX_AGENT_SERVICE_COMMANDS} commands`)
      .refine((list) => new Set(list.map((s) => s.name)).size === list.length, "service names must be unique"),
  })
  .strict();
export type SaveServiceCommandsRequest = z.infer<typeof SaveServiceCommandsRequest>;

/** Key names only, never values: a value would be stored on the session and shown to every client. */
export const AgentEnvFile = z
  .object({
    path: line(1024),
    format: z.enum(["dotenv", "json"]).optional(),
    keys: z
      .array(z.object({ name: EnvKeyName, required: z.boolean().optional() }).strict())
      .min(1)
      .max(MAX_AGENT_ENV_FILE_KEYS, `must list at most ${MAX_AGENT_ENV_FILE_KEYS} keys`),
  })
  .strict();

export const SaveEnvFilesRequest = z
  .object({ files: z.array(AgentEnvFile).min(1).max(MAX_AGENT_ENV_FILES, `must list at most ${MAX_AGENT_ENV_FILES} files`) })
  .strict();
export type SaveEnvFilesRequest = z.infer<typeof SaveEnvFilesRequest>;

export const RequestEnvVariablesRequest = z
  .object({
    keys: z
      .array(z.object({ name: EnvKeyName, required: z.boolean().optional(), description: line(500).optional() }).strict())
      .min(1)
      .max(MAX_REQUESTED_ENV_KEYS, `must list at most ${MAX_REQUESTED_ENV_KEYS} keys`)
      .refine((list) => new Set(list.map((k) => k.name)).size === list.length, "key names must be unique"),
    reason: line(1000).optional(),
  })
  .strict();
export type RequestEnvVariablesRequest = z.infer<typeof RequestEnvVariablesRequest>;

/** "field.path: message" of the first issue, as the control plane's 400s name the field. */
export function describeRequestIssue(error: z.ZodError, root = "body"): string {
  const issue = error.issues[0];
  if (!issue) return `${root}: invalid`;
  const path = [root, ...issue.path.map(String)].join(".");
  if (issue.code === "unrecognized_keys") return `${path}: unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
  return `${path}: ${issue.message}`;
}

/** `verify` as the tool sends it: where the evidence is, and what the agent says it did. */
export const VerifyRequest = z
  .object({
    folder: line(1024).optional(),
    summary: z
      .string()
      .min(1)
      .max(4_000, "must be at most 4000 characters")
      // eslint-disable-next-line no-control-regex -- matching control characters is the point
      .refine((v) => !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(v), "must be printable text")
      .optional(),
  })
  .strict();
export type VerifyRequest = z.infer<typeof VerifyRequest>;

export const MAX_EVIDENCE_FILES = 100;
export const MAX_REPORTED_SERVICES = 50;

/** What the sidecar reports to the control plane for `verify`: the evidence listed (never read) and the services' state. */
export const VerificationReport = z
  .object({
    folder: line(1024).nullable(),
    summary: VerifyRequest.shape.summary.unwrap().nullable(),
    files: z
      .array(z.object({ path: line(1024), bytes: z.number().int().min(0) }).strict())
      .max(MAX_EVIDENCE_FILES, `must list at most ${MAX_EVIDENCE_FILES} files`),
    /** More files were in the folder than are listed. */
    truncated: z.boolean(),
    services: z
      .array(z.object({ name: line(64), status: z.enum(["running", "stopped", "error"]), exitCode: z.number().int().nullable() }).strict())
      .max(MAX_REPORTED_SERVICES, `must list at most ${MAX_REPORTED_SERVICES} services`),
  })
  .strict();
export type VerificationReport = z.infer<typeof VerificationReport>;
