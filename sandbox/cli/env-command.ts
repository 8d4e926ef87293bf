/**
 * `env apply` and `env scrub` (seed 003 §6.11, issue 7 item 4). Both are two-pass: pass 1
 * checks every file's path (inside WORKSPACE_DIR, symlinked parents dereferenced) and, for
 * apply, every required key; only when all of it passes does pass 2 touch the disk. A file's
 * last path component is never followed: apply replaces it by rename and scrub unlinks it, so a
 * symlink planted at a target path cannot redirect a write or a delete.
 *
 * Values (issue 23): with `SIDECAR_SOCKET` set, apply first asks the sidecar's socket for the
 * session's org secrets (`GET /env/values`) and those win over every other source; when that
 * ask fails, apply fails (a file written without the org's values would be silently wrong).
 */
import { lstat, mkdir, open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import * as z from "zod";
import { OutsideWorkspaceError, resolveInsideWorkspace, splitFilePath } from "../shared/workspace-path";
import { EnvSpecSchema, parseValues, planEnvFiles, renderEnvFile, type EnvSpec } from "./env-spec";
import { addExclude, containingRepo, removeExclude } from "./git-exclude";
import { socketJson, type SocketClientOptions } from "./socket-client";

/** seed 003 §6.11: the provider drops per-session values here. */
export const DEFAULT_VALUES_FILE = "/tmp/.proliferate_env.json";

export interface EnvCommandIo {
  workspaceDir: string;
  env: Record<string, string | undefined>;
  out: (line: string) => void;
  /** The org's values from the sidecar (`SIDECAR_SOCKET`); absent: none asked for. */
  sidecarValues?: () => Promise<Record<string, string>>;
}

export class EnvCommandError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join("\n"));
    this.name = "EnvCommandError";
  }
}

/** `--spec` is a file path, or inline JSON (the boot sequence may pass the spec directly). */
export async function loadSpec(spec: string): Promise<EnvSpec> {
  const text = /^\s*[[{]/.test(spec) ? spec : await readFile(spec, "utf8");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new EnvCommandError([`spec is not valid JSON`]);
  }
  const parsed = EnvSpecSchema.safeParse(raw);
  if (!parsed.success) throw new EnvCommandError(parsed.error.issues.map((i) => `spec ${i.path.join(".")}: ${i.message}`));
  return parsed.data;
}

async function loadValues(explicit: string | undefined, env: Record<string, string | undefined>): Promise<Record<string, string>> {
  const file = explicit ?? env.ENV_VALUES_FILE ?? DEFAULT_VALUES_FILE;
  try {
    return parseValues(await readFile(file, "utf8"), file);
  } catch (err) {
    // The default file is optional; a file the caller named must exist.
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && explicit === undefined) return {};
    throw new EnvCommandError([err instanceof Error ? err.message : String(err)]);
  }
}

const SidecarValuesSchema = z.object({ values: z.record(z.string(), z.string()) });

/** `GET /env/values` on the sidecar's socket: the session's org secrets, fresh each time. */
export async function sidecarEnvValues(socket: SocketClientOptions): Promise<Record<string, string>> {
  const parsed = SidecarValuesSchema.safeParse(await socketJson<unknown>(socket, "GET", "/env/values"));
  if (!parsed.success) throw new Error("the sidecar's answer is not {values: {NAME: string}}");
  return parsed.data.values;
}

async function loadSidecarValues(io: EnvCommandIo): Promise<Record<string, string>> {
  if (!io.sidecarValues) return {};
  try {
    return await io.sidecarValues();
  } catch (err) {
    throw new EnvCommandError([`org secrets: could not read env values from the sidecar: ${err instanceof Error ? err.message : String(err)}`]);
  }
}

/** Real parent directory inside the workspace plus the (unfollowed) file name. */
async function targetPath(workspaceDir: string, path: string): Promise<string> {
  const { dir, name } = splitFilePath(path);
  const parent = await resolveInsideWorkspace(workspaceDir, dir);
  return join(parent, name);
}

async function resolveTargets(workspaceDir: string, spec: EnvSpec): Promise<{ targets: string[]; problems: string[] }> {
  const targets: string[] = [];
  const problems: string[] = [];
  for (const file of spec) {
    try {
      const target = await targetPath(workspaceDir, file.path);
      const existing = await lstat(target).catch(() => null);
      if (existing?.isDirectory()) problems.push(`${file.path}: is a directory`);
      targets.push(target);
    } catch (err) {
      problems.push(err instanceof OutsideWorkspaceError ? `${file.path}: outside the workspace` : `${file.path}: ${err instanceof Error ? err.message : String(err)}`);
      targets.push("");
    }
  }
  return { targets, problems };
}

/** Write-then-rename, mode 0600: readers never see a half-written file of secrets. */
async function writeAtomically(target: string, content: string): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  const tmp = join(dirname(target), `.${basename(target)}.${process.pid}.tmp`);
  const handle = await open(tmp, "wx", 0o600);
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
  await rename(tmp, target);
}

export async function envApply(io: EnvCommandIo, opts: { spec: string; values?: string }): Promise<void> {
  const spec = await loadSpec(opts.spec);
  // Org secrets are the source of truth: merged over the values file, which outranks the
  // environment and the spec's own `value` in planEnvFiles.
  const values = { ...(await loadValues(opts.values, io.env)), ...(await loadSidecarValues(io)) };
  // Pass 1: every path and every required key, all problems reported at once.
  const { targets, problems } = await resolveTargets(io.workspaceDir, spec);
  const plan = planEnvFiles(spec, { values, env: io.env });
  if (!plan.ok) problems.push(...plan.problems);
  if (problems.length > 0 || !plan.ok) throw new EnvCommandError(problems);
  // Pass 2: write, then exclude from the containing repo.
  const root = await resolveInsideWorkspace(io.workspaceDir, ".");
  for (const [i, file] of plan.files.entries()) {
    const target = targets[i] ?? "";
    await writeAtomically(target, renderEnvFile(file));
    const repo = await containingRepo(root, dirname(target));
    if (repo) await addExclude(repo, target);
    io.out(`wrote ${file.path} (${file.entries.length} keys)${repo ? "" : " (not inside a git repository: nothing excluded)"}`);
  }
}

export async function envScrub(io: EnvCommandIo, opts: { spec: string }): Promise<void> {
  const spec = await loadSpec(opts.spec);
  const { targets, problems } = await resolveTargets(io.workspaceDir, spec);
  if (problems.length > 0) throw new EnvCommandError(problems);
  const root = await resolveInsideWorkspace(io.workspaceDir, ".");
  for (const [i, file] of spec.entries()) {
    const target = targets[i] ?? "";
    await rm(target, { force: true });
    const repo = await containingRepo(root, dirname(target));
    if (repo) await removeExclude(repo, target);
    io.out(`removed ${file.path}`);
  }
}
