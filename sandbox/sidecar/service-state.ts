/**
 * The service manager's persisted state (seed 003 §6.10): definitions, the desired state, and
 * the pid of the running process group, written atomically to `<SIDECAR_STATE_DIR>/state.json`
 * so a restarted sidecar adopts what still runs and restores what should.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import { groupIsOurs, killGroup } from "../shared/process-group";

/** Names become log file names, so they are restricted to a safe, path-free alphabet. */
export const ServiceNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "service name: letters, digits, '_', '.', '-' (max 64), starting with a letter or digit");

export const ServiceDefinitionSchema = z.object({
  name: ServiceNameSchema,
  command: z.string().min(1, "command must not be empty").max(8_192),
  /** Working directory, relative to the workspace (or absolute inside it). */
  cwd: z.string().min(1).default("."),
});
export type ServiceDefinition = z.infer<typeof ServiceDefinitionSchema>;

export const ServiceStatusSchema = z.enum(["running", "stopped", "error"]);
export type ServiceStatus = z.infer<typeof ServiceStatusSchema>;

const ServiceRecordSchema = ServiceDefinitionSchema.extend({
  /** What the user last asked for; a restarted sidecar brings back services lost while "running". */
  desired: z.enum(["running", "stopped"]),
  status: ServiceStatusSchema,
  /** Leader pid while the leader runs (services spawn detached, so it is also the group id). */
  pid: z.number().int().positive().nullable(),
  /**
   * Process group of the last run, kept after the leader exits: children it left behind are
   * still the service's, and stop/start must reach them (never two copies of a dev server).
   */
  pgid: z.number().int().positive().nullable().default(null),
  /** /proc start time of the leader, so a recycled pid is never mistaken for the service. */
  startTime: z.string().nullable(),
  startedAt: z.number().nullable(),
  exitCode: z.number().int().nullable(),
});
export type ServiceRecord = z.infer<typeof ServiceRecordSchema>;

const SidecarStateSchema = z.object({
  version: z.literal(1),
  services: z.array(ServiceRecordSchema),
  exposedPort: z.number().int().nullable(),
});
export type SidecarState = z.infer<typeof SidecarStateSchema>;

export const emptyState = (): SidecarState => ({ version: 1, services: [], exposedPort: null });

export function stateFile(stateDir: string): string {
  return join(stateDir, "state.json");
}

export function logFile(stateDir: string, name: string): string {
  return join(stateDir, "logs", `${name}.log`);
}

/** A missing file is a fresh sandbox; a corrupt one is reported, never silently discarded. */
export async function loadState(stateDir: string): Promise<SidecarState> {
  let text: string;
  try {
    text = await readFile(stateFile(stateDir), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return emptyState();
    throw err;
  }
  const parsed = SidecarStateSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${stateFile(stateDir)} is not a valid sidecar state: ${parsed.error.message}`);
  return parsed.data;
}

/** Write-then-rename: a crash mid-write leaves the previous state, never half a file. */
export async function saveState(stateDir: string, state: SidecarState): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  const file = stateFile(stateDir);
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}

/** A service's process group as the state file recorded it (for whoever tears the sandbox down). */
export interface RecordedServiceGroup {
  name: string;
  pgid: number;
  startTime: string | null;
}

/**
 * The process group of every service the state file records, read leniently: a local sandbox's
 * terminate must still reach the services of a sidecar that died mid-write or of an older state
 * version, so each record counts on its own and a missing or unreadable file means none.
 */
export async function recordedServiceGroups(stateDir: string): Promise<RecordedServiceGroup[]> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(stateFile(stateDir), "utf8"));
  } catch {
    return [];
  }
  const services = (value as { services?: unknown } | null)?.services;
  if (!Array.isArray(services)) return [];
  const groups: RecordedServiceGroup[] = [];
  for (const rec of services as Record<string, unknown>[]) {
    const pgid = rec?.pgid ?? rec?.pid;
    if (typeof pgid !== "number" || !Number.isInteger(pgid) || pgid <= 1) continue;
    groups.push({ name: String(rec.name), pgid, startTime: typeof rec.startTime === "string" ? rec.startTime : null });
  }
  return groups;
}

/**
 * Ends every recorded service group that is still ours (SIGTERM, SIGKILL after `graceMs`), for
 * whoever tears the sandbox down: services run as their own process groups (so a restarted
 * sidecar adopts them), so ending the sandbox's group or the sidecar does not reach them.
 * Idempotent; a recycled pid (another /proc start time) is left alone. Returns the names of
 * services whose processes survived SIGKILL.
 */
export async function endRecordedServices(stateDir: string, graceMs = 2_000): Promise<string[]> {
  const groups = await recordedServiceGroups(stateDir);
  const survivors = await Promise.all(groups.map(async (g) => (groupIsOurs(g.pgid, g.startTime) && !(await killGroup(g.pgid, graceMs)) ? g.name : null)));
  return survivors.filter((name): name is string => name !== null);
}
