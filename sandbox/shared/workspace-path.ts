/**
 * The one rule every path the sidecar or the CLI touches obeys (seed 003 §7 "Path traversal
 * prevention"): it resolves inside WORKSPACE_DIR after symlinks are dereferenced. `..`,
 * absolute paths elsewhere, and a symlink inside the workspace pointing outside are all refused.
 * A path that does not exist yet (a file `env apply` is about to write) is judged by the real
 * path of its deepest existing ancestor, so a symlinked parent directory cannot smuggle it out.
 */
import { realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, normalize, relative, resolve, sep } from "node:path";

export class OutsideWorkspaceError extends Error {
  constructor(readonly requested: string) {
    super(`path "${requested}" is outside the workspace`);
    this.name = "OutsideWorkspaceError";
  }
}

export class PathNotFoundError extends Error {
  constructor(readonly requested: string) {
    super(`path "${requested}" does not exist`);
    this.name = "PathNotFoundError";
  }
}

/** `candidate` is `root` or below it; both must already be real (symlink-free) absolute paths. */
export function isInside(root: string, candidate: string): boolean {
  if (candidate === root) return true;
  const base = root.endsWith(sep) ? root : root + sep;
  return candidate.startsWith(base);
}

function missing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
}

/** Real path of `path`, or of its deepest existing ancestor with the missing tail re-joined. */
async function realpathAllowMissing(path: string): Promise<{ real: string; exists: boolean }> {
  const tail: string[] = [];
  let current = path;
  for (;;) {
    try {
      const real = await realpath(current);
      return { real: tail.length === 0 ? real : join(real, ...tail.reverse()), exists: tail.length === 0 };
    } catch (err) {
      if (!missing(err)) throw err;
      const parent = dirname(current);
      if (parent === current) throw err;
      tail.push(current.slice(parent.length).replace(/^[/\\]+/, ""));
      current = parent;
    }
  }
}

/**
 * The lexical half of the rule, for paths judged before any sandbox exists (the boot's plan, the
 * control plane's API) and the first check of `resolveInsideWorkspace`: `requested`, relative to
 * the absolute `workspaceDir`, stays inside it once `.` and `..` are applied. Returns the joined
 * path or throws `OutsideWorkspaceError`. Symlinks are judged where the path is used.
 */
export function resolveInsideWorkspaceLexically(workspaceDir: string, requested: string): string {
  if (requested.includes("\0")) throw new OutsideWorkspaceError(requested.replace(/\0/g, "\\0"));
  const candidate = resolve(workspaceDir, requested);
  if (!isInside(workspaceDir, candidate)) throw new OutsideWorkspaceError(requested);
  return candidate;
}

export class NotAFileError extends Error {
  constructor(readonly requested: string) {
    super(`"${requested}" does not name a file`);
    this.name = "NotAFileError";
  }
}

/**
 * A file path's parent directory and file name; `NotAFileError` for a path that names no file
 * (empty, `.`, `..`, or ending in `/`). What `env apply` writes to, and what the API accepts.
 */
export function splitFilePath(path: string): { dir: string; name: string } {
  const name = basename(path);
  if (name === "" || name === "." || name === ".." || path.endsWith("/")) throw new NotAFileError(path);
  return { dir: dirname(path), name };
}

export interface ResolveOptions {
  /** Refuse a path that does not exist (404-style) instead of judging its ancestor. */
  mustExist?: boolean;
}

/**
 * Resolves `requested` (relative to the workspace, or absolute) to a real absolute path inside
 * the workspace, or throws `OutsideWorkspaceError` / `PathNotFoundError`.
 */
export async function resolveInsideWorkspace(workspaceDir: string, requested: string, opts: ResolveOptions = {}): Promise<string> {
  if (requested.includes("\0")) throw new OutsideWorkspaceError(requested.replace(/\0/g, "\\0"));
  const root = await realpath(workspaceDir);
  // Lexical check first: `../x` is refused even when the target does not exist.
  const candidate = isAbsolute(requested) ? normalize(requested) : resolveInsideWorkspaceLexically(root, requested);
  const { real, exists } = await realpathAllowMissing(candidate);
  if (!isInside(root, real)) throw new OutsideWorkspaceError(requested);
  if (opts.mustExist && !exists) throw new PathNotFoundError(requested);
  return real;
}

/** The workspace-relative form of a real path inside it ("." for the root itself). */
export async function workspaceRelative(workspaceDir: string, realPath: string): Promise<string> {
  const root = await realpath(workspaceDir);
  return relative(root, realPath) || ".";
}
