/**
 * Keeps generated env files out of commits: each one gets an anchored line in the
 * `.git/info/exclude` of the repository that contains it (seed 003 §6.11), added idempotently by
 * `env apply` and removed by `env scrub`. `info/exclude` is local to the clone, so nothing about
 * the secrets (not even their file names) lands in the repository's own `.gitignore`.
 */
import { execFile } from "node:child_process";
import { lstat, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative } from "node:path";
import { isInside } from "../shared/workspace-path";

/** The nearest directory at or above `dir`, and inside `root`, that holds a `.git`; null if none. */
export async function containingRepo(root: string, dir: string): Promise<string | null> {
  let current = dir;
  for (;;) {
    if (!isInside(root, current)) return null;
    try {
      await lstat(join(current, ".git"));
      return current;
    } catch {
      // keep walking up
    }
    if (current === root) return null;
    current = dirname(current);
  }
}

/** Where this clone keeps `info/exclude` (a worktree's `.git` is a file pointing elsewhere). */
function excludeFile(repo: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("git", ["rev-parse", "--git-path", "info/exclude"], { cwd: repo }, (err, stdout) => {
      if (err) return reject(new Error(`git rev-parse in ${repo} failed: ${err.message}`));
      const path = stdout.trim();
      resolve(isAbsolute(path) ? path : join(repo, path));
    });
  });
}

/** An anchored gitignore pattern matching exactly this path (glob characters escaped). */
export function excludePattern(repo: string, file: string): string {
  const rel = relative(repo, file).split("\\").join("/");
  return `/${rel.replace(/[\\*?[\]!#]/g, (c) => `\\${c}`).replace(/ $/, "\\ ")}`;
}

export function withLine(content: string, line: string): string {
  const lines = content.split("\n");
  if (lines.includes(line)) return content;
  const base = content === "" || content.endsWith("\n") ? content : `${content}\n`;
  return `${base}${line}\n`;
}

export function withoutLine(content: string, line: string): string {
  return content
    .split("\n")
    .filter((l) => l !== line)
    .join("\n");
}

async function readOrEmpty(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw err;
  }
}

export async function addExclude(repo: string, file: string): Promise<void> {
  const path = await excludeFile(repo);
  const before = await readOrEmpty(path);
  const after = withLine(before, excludePattern(repo, file));
  if (after === before) return;
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, after);
}

export async function removeExclude(repo: string, file: string): Promise<void> {
  const path = await excludeFile(repo);
  const before = await readOrEmpty(path);
  const after = withoutLine(before, excludePattern(repo, file));
  if (after !== before) await writeFile(path, after);
}
