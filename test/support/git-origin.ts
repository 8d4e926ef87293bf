/** A throwaway git repository to clone from over `file://` (tests only): isolated from the host's git config. */
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface GitOrigin {
  dir: string;
  url: string;
  git(...args: string[]): Buffer;
}

/** `git init` on `main` with one empty root commit. */
export function gitOrigin(prefix: string): GitOrigin {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "", HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
    });
  git("init", "--quiet");
  git("commit", "--quiet", "--allow-empty", "-m", "root");
  return { dir, url: `file://${dir}`, git };
}
