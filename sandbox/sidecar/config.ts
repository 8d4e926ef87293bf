/**
 * The sidecar's configuration, parsed once from `process.env` (STYLE.md 4); a bad value fails
 * start-up with a message naming the variable. The sandbox key comes from `SIDECAR_TOKEN_FILE`
 * (a path, or `-` for stdin: how the boot hands it over, so it is in no `/proc/<pid>/environ`),
 * or for a sidecar run by hand from `SIDECAR_TOKEN`; not both. It may be absent: the sidecar still
 * starts (so `/health` answers) and refuses every other route. Without `SESSION_ID` only the
 * plain token opens it (access tokens name a session). Without `SIDECAR_SOCKET` there is no
 * in-sandbox listener; without `CONTROL_PLANE_URL` its credential routes answer 503.
 */
import { dirname, isAbsolute, join, resolve } from "node:path";
import * as z from "zod";
import type { SidecarOptions } from "./server";

/** Linux `sun_path` is 108 bytes including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 107;

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v));

const EnvSchema = z.object({
  SIDECAR_PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  SIDECAR_HOST: z.string().min(1).default("0.0.0.0"),
  SIDECAR_TOKEN: optionalString,
  SIDECAR_TOKEN_FILE: optionalString,
  /** The session this sandbox runs; access tokens are checked against it (none: refused). */
  SESSION_ID: optionalString,
  /** seed 003 §4 "Sandbox Filesystem Layout": repos live under /home/user/workspace. */
  WORKSPACE_DIR: z.string().min(1).default("/home/user/workspace"),
  SIDECAR_STATE_DIR: optionalString,
  CADDY_ADMIN_URL: optionalString.pipe(z.url().optional()),
  SERVICES_FILE: optionalString,
  /**
   * The in-sandbox-only listener (git credentials, env values); unset: none. Absolute, and short
   * enough for a Unix socket address (`sun_path` holds 108 bytes with the terminating NUL).
   */
  SIDECAR_SOCKET: optionalString.pipe(
    z
      .string()
      .refine((p) => isAbsolute(p), "must be an absolute path")
      .refine((p) => Buffer.byteLength(p) <= MAX_SOCKET_PATH_BYTES, `must be at most ${MAX_SOCKET_PATH_BYTES} bytes`)
      .optional(),
  ),
  /** Where the sidecar asks for git credentials and env values (issue 23); unset: those answer 503. */
  CONTROL_PLANE_URL: optionalString.pipe(z.url().optional()),
});

/** Where the key is to be read from (`SIDECAR_TOKEN_FILE`), or null when it is not. */
export function sidecarKeySource(env: NodeJS.ProcessEnv): string | null {
  const source = env.SIDECAR_TOKEN_FILE?.trim();
  return source ? source : null;
}

export function sidecarOptionsFromEnv(env: NodeJS.ProcessEnv): SidecarOptions {
  const parsed = EnvSchema.refine((c) => !(c.SIDECAR_TOKEN && c.SIDECAR_TOKEN_FILE), {
    path: ["SIDECAR_TOKEN_FILE"],
    message: "set either SIDECAR_TOKEN_FILE or SIDECAR_TOKEN, not both",
  }).safeParse(env);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
    throw new Error(`invalid sidecar configuration: ${issues}`);
  }
  const c = parsed.data;
  const workspaceDir = resolve(c.WORKSPACE_DIR);
  return {
    port: c.SIDECAR_PORT,
    host: c.SIDECAR_HOST,
    token: c.SIDECAR_TOKEN,
    sessionId: c.SESSION_ID,
    workspaceDir,
    stateDir: c.SIDECAR_STATE_DIR ? resolve(c.SIDECAR_STATE_DIR) : join(dirname(workspaceDir), ".sidecar"),
    caddyAdminUrl: c.CADDY_ADMIN_URL,
    servicesFile: c.SERVICES_FILE ? resolve(c.SERVICES_FILE) : undefined,
    socketPath: c.SIDECAR_SOCKET,
    controlPlaneUrl: c.CONTROL_PLANE_URL,
  };
}
