/**
 * What the boot sequence is told (seed 003 §6.4): the session's request (repos, prompt, session
 * type, snapshot facts) and the layout of the sandbox it runs in (paths, ports, which optional
 * components exist). Providers build it; `main.ts` parses it at the edge with these schemas.
 *
 * Secrets never travel in the spec: API keys and the session's env vars reach the boot process
 * through its environment, and the boot passes that environment on; the sandbox key reaches it as
 * a file it takes before starting anything (sandbox/shared/sandbox-key-file.ts).
 *
 * Version skew: the control plane may be newer than the boot baked into an image, so unknown
 * keys are stripped rather than rejected, and every field added later must be optional.
 */
import * as z from "zod";
import { RepoSpec, SessionType } from "../../functions/domain/session";
import { EnvFileSchema } from "../shared/env-file-schema";

export const BOOT_SPEC_VERSION = 1;

const Port = z.number().int().min(1).max(65535);
const AbsolutePath = z.string().regex(/^\//, "must be an absolute path");

/** A process the boot may start; `requires` names a file that must exist (an optional component). */
export const BootCommand = z.object({
  argv: z.array(z.string().min(1)).min(1),
  requires: AbsolutePath.optional(),
});
export type BootCommand = z.infer<typeof BootCommand>;

export const ServiceCommandSpec = z.object({
  name: z.string().min(1),
  command: z.string().min(1),
  cwd: z.string().optional(),
});

export const GitFreshnessSpec = z.object({
  enabled: z.boolean(),
  cadenceSeconds: z.number().min(0),
});

export const BootRequest = z.object({
  sessionId: z.string().min(1),
  sessionType: SessionType.default("coding"),
  // Stripped, not strict: a newer control plane may send repo fields this boot does not know.
  repos: z.array(RepoSpec.strip()).default([]),
  /** The filesystem came from a session/prebuild snapshot: repos and metadata are already there. */
  restored: z.boolean(),
  /** Epoch ms from the control plane: metadata timestamps and the git-freshness cadence. */
  now: z.number().int().nonnegative(),
  systemPrompt: z.string().nullable().default(null),
  /** OpenCode model id (e.g. "anthropic/claude-sonnet-4-5"); ignored when the layout has the dev model. */
  modelId: z.string().min(1).nullable().default(null),
  /** seed 000 "snapshotHasDeps gates service auto-start". */
  snapshotHasDeps: z.boolean().default(false),
  serviceCommands: z.array(ServiceCommandSpec).default([]),
  /**
   * The in-sandbox CLI's `env apply` spec (sandbox/cli/README.md, the CLI's own file schema),
   * applied in phase 2; absent means no env step. The control plane sends paths and key names only.
   */
  envFiles: z.array(EnvFileSchema).optional(),
  sshPublicKey: z.string().min(1).nullable().default(null),
  triggerContext: z.record(z.string(), z.unknown()).nullable().default(null),
  gitFreshness: GitFreshnessSpec.nullable().default(null),
  /** The agent's commits' author (`~/.gitconfig` `[user]`). */
  gitIdentity: z.object({ name: z.string().min(1), email: z.string().min(1) }).nullable().default(null),
  /** Where the sidecar asks for the session's git credentials and env-file values (no secret: the sidecar signs with its key). */
  controlPlaneUrl: z.url().nullable().default(null),
  /** Start the service commands at boot even without `snapshotHasDeps` (the session named them itself). */
  autoStartServices: z.boolean().default(false),
});
export type BootRequest = z.infer<typeof BootRequest>;
export type BootRequestInput = z.input<typeof BootRequest>;

export const BootLayout = z.object({
  home: AbsolutePath,
  workspace: AbsolutePath,
  /** Where started processes write their output (`opencode.log`, `caddy.log`, `sidecar.log`). */
  logDir: AbsolutePath,
  opencode: z.object({ bin: z.string().min(1), port: Port, hostname: z.string().min(1) }),
  /** seed 003 §5 "Reliability": 30 s; the local provider passes its own (slower machines, parallel tests). */
  readinessBudgetMs: z.number().int().positive().default(30_000),
  /** A `node_modules` directory that holds `zod`, imported by the agent tools. */
  toolModules: AbsolutePath.nullable().default(null),
  /** The offline development model (local provider only), started in the boot process. */
  /** `requiredKeySha256`: the model refuses requests whose key does not hash to it (a hash: the spec holds no secret). */
  devModel: z.object({ port: Port, requiredKeySha256: z.string().regex(/^[0-9a-f]{64}$/).nullable().default(null) }).nullable().default(null),
  caddy: z.object({ bin: z.string().min(1), caddyfile: AbsolutePath, adminUrl: z.url() }).nullable().default(null),
  sidecar: z
    .object({
      command: BootCommand,
      host: z.string().min(1),
      port: Port,
      /**
       * The sidecar's in-sandbox-only Unix socket (git credentials, env values): reachable by the
       * sandbox's own processes, never through the preview tunnel. Keep it short (sun_path: 108 bytes).
       */
      socket: AbsolutePath.nullable().default(null),
    })
    .nullable()
    .default(null),
  /** The in-sandbox CLI (`env apply`, `services start`). */
  cli: BootCommand.nullable().default(null),
  /** Starts the image's infrastructure services (sshd); seed 003 `start-services.sh`. */
  servicesScript: AbsolutePath.nullable().default(null),
  /** The sandbox ends itself after this long (local provider: expiry holds without the control plane). */
  expiresInSeconds: z.number().positive().nullable().default(null),
});
export type BootLayout = z.infer<typeof BootLayout>;
export type BootLayoutInput = z.input<typeof BootLayout>;

export const BootSpec = z.object({
  version: z.literal(BOOT_SPEC_VERSION),
  request: BootRequest,
  layout: BootLayout,
});
export type BootSpec = z.infer<typeof BootSpec>;
export type BootSpecInput = z.input<typeof BootSpec>;

export class BootSpecError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BootSpecError";
  }
}

/** Parses a spec (already decoded JSON); the message names every invalid field. */
export function parseBootSpec(value: unknown): BootSpec {
  const parsed = BootSpec.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "spec"}: ${i.message}`).join("; ");
    throw new BootSpecError(`invalid boot spec: ${issues}`);
  }
  return parsed.data;
}
