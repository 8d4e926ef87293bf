/**
 * Git views for the sidecar (seed 003 §6.8): discover the repos in the workspace, their status,
 * and their diff against HEAD capped at 64 KB. A repo is named by its workspace-relative path;
 * it must resolve inside the workspace (symlinks dereferenced) and hold its own `.git`, so git
 * never walks up to a repository outside the workspace.
 */
import { spawn } from "node:child_process";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { OutsideWorkspaceError, PathNotFoundError, resolveInsideWorkspace, workspaceRelative } from "../shared/workspace-path";
import { minimalGitEnv, safeGitArgs } from "../shared/safe-git";
import { invalidRequest, notFound } from "./errors";
import { capUtf8, parsePorcelainV2, type GitStatus } from "./git-porcelain";

export const DIFF_CAP_BYTES = 64 * 1024;
const DISCOVERY_DEPTH = 4;
const SKIPPED_DIRS = new Set(["node_modules", ".git", ".venv", "vendor", "dist", "build", "target"]);
/** git's well-known empty tree: the diff base of a repo with no commit yet. */
const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/** No pager, no optional index lock (the agent may be running git at the same time). */
const GIT_ENV = { GIT_OPTIONAL_LOCKS: "0", GIT_PAGER: "cat" };
/**
 * Submodule work trees are not inspected: that would run git inside them, under config the
 * parent's command line does not know (their own filter drivers). Changed submodule commits still show.
 */
const SUBMODULES = "--ignore-submodules=dirty";

export interface GitRepo {
  path: string;
  name: string;
}

async function hasGitEntry(dir: string): Promise<boolean> {
  try {
    await lstat(join(dir, ".git"));
    return true;
  } catch {
    return false;
  }
}

/** Breadth-first walk, symlinks not followed (a link out of the workspace is never entered). */
export async function discoverRepos(workspaceDir: string, maxDepth = DISCOVERY_DEPTH): Promise<GitRepo[]> {
  const root = await resolveInsideWorkspace(workspaceDir, ".");
  const repos: GitRepo[] = [];
  let level = [root];
  for (let depth = 0; depth <= maxDepth && level.length > 0; depth++) {
    const next: string[] = [];
    for (const dir of level) {
      if (await hasGitEntry(dir)) {
        const path = await workspaceRelative(workspaceDir, dir);
        repos.push({ path, name: path === "." ? (root.split("/").pop() ?? ".") : (path.split("/").pop() ?? path) });
      }
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) {
        if (e.isDirectory() && !e.isSymbolicLink() && !SKIPPED_DIRS.has(e.name)) next.push(join(dir, e.name));
      }
    }
    level = next;
  }
  return repos.sort((a, b) => a.path.localeCompare(b.path));
}

/** The real directory of a repo named by the client, or a 400/404. */
export async function resolveRepo(workspaceDir: string, repo: string | null): Promise<string> {
  if (repo === null || repo === "") throw invalidRequest("query parameter `repo` is required (a path from GET /git/repos)");
  let dir: string;
  try {
    dir = await resolveInsideWorkspace(workspaceDir, repo, { mustExist: true });
  } catch (err) {
    if (err instanceof OutsideWorkspaceError) throw invalidRequest(`repo: ${err.message}`, "outside_workspace");
    if (err instanceof PathNotFoundError) throw notFound(`repo: ${err.message}`);
    throw err;
  }
  if (!(await hasGitEntry(dir))) throw notFound(`repo "${repo}" is not a git repository`);
  return dir;
}

interface GitRun {
  stdout: Buffer;
  stderr: string;
  exitCode: number | null;
  truncated: boolean;
}

/**
 * Runs git, keeping at most `maxBytes` of stdout: past that it stops reading and kills git. The
 * repository is the agent's: git gets a minimal environment (never the sandbox key) and every
 * config key that would run a program is overridden (sandbox/shared/safe-git.ts).
 */
async function runGit(cwd: string, args: string[], maxBytes = 16 * 1024 * 1024): Promise<GitRun> {
  const safety = await safeGitArgs(cwd, process.env);
  return new Promise((resolve, reject) => {
    const child = spawn("git", [...safety, ...args], { cwd, env: minimalGitEnv(process.env, GIT_ENV), stdio: ["ignore", "pipe", "pipe"] });
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      if (truncated) return;
      chunks.push(chunk);
      size += chunk.length;
      if (size > maxBytes) {
        truncated = true;
        child.kill("SIGKILL");
      }
    });
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 4_096) stderr += chunk.toString("utf8");
    });
    child.once("error", reject);
    child.once("close", (code) => resolve({ stdout: Buffer.concat(chunks), stderr, exitCode: code, truncated }));
  });
}

function gitFailed(args: string[], run: GitRun): Error {
  return new Error(`git ${args[0] ?? ""} exited ${String(run.exitCode)}: ${run.stderr.trim().slice(0, 500)}`);
}

export async function gitStatus(dir: string): Promise<GitStatus> {
  const args = ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", SUBMODULES];
  const run = await runGit(dir, args);
  if (run.exitCode !== 0) throw gitFailed(args, run);
  return parsePorcelainV2(run.stdout.toString("utf8"));
}

export interface GitDiff {
  diff: string;
  truncated: boolean;
  bytes: number;
}

/** Working tree and index against HEAD (or the empty tree before the first commit), capped. */
export async function gitDiff(dir: string, capBytes = DIFF_CAP_BYTES): Promise<GitDiff> {
  const head = await runGit(dir, ["rev-parse", "--verify", "--quiet", "HEAD"]);
  const base = head.exitCode === 0 ? "HEAD" : EMPTY_TREE;
  // --no-ext-diff / --no-textconv: the output is the repository's bytes, not a configured program's.
  const args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", SUBMODULES, base];
  const run = await runGit(dir, args, capBytes);
  if (!run.truncated && run.exitCode !== 0) throw gitFailed(args, run);
  const kept = capUtf8(run.stdout, capBytes);
  return { diff: kept.toString("utf8"), truncated: run.truncated || kept.length < run.stdout.length, bytes: kept.length };
}
