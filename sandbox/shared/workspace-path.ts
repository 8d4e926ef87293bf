/**
 * The one rule every path the sidecar or the CLI touches obeys (seed 003 §7 "Path traversal
 * prevention"): it resolves inside WORKSPACE_DIR after symlinks are dereferenced. `..`,
 * absolute paths elsewhere, and a symlink inside the workspace pointing outside are all refused.
 * A path that does not exist yet (a file `env apply` is about to write) is judged by the real
 * path of its deepest existing ancestor, so a symlinked parent directory cannot smuggle it out.
 */
import { realpath } from "node:fs/promises";
import { dirname, isAbsolute, join, normalize, relative, resolve, sep } from "node:path";

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
  const candidate = isAbsolute(requested) ? normalize(requested) : resolve(root, requested);
  // Lexical check first: `../x` is refused even when the target does not exist.
  if (!isAbsolute(requested) && !isInside(root, candidate)) throw new OutsideWorkspaceError(requested);
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
