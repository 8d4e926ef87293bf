/**
 * A temporary directory for e2e tests whose local sandboxes run real OpenCode with custom tools.
 * The host's directories above a local sandbox are not the agent's: OpenCode reads `.opencode/`
 * in every ancestor of a workspace outside git, and its custom tools wait for an npm install into
 * each (minutes against the unreachable registry). Sandboxes created while `TMPDIR` points here
 * live under a directory that has one, as a CI machine's temporary directory may.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Creates the directory and points `TMPDIR` at it; `restore` puts `TMPDIR` back and removes it. */
export function useOpenCodeHostTmp(prefix: string): { dir: string; restore: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const saved = process.env.TMPDIR;
  mkdirSync(join(dir, ".opencode"));
  writeFileSync(join(dir, ".opencode", "package.json"), JSON.stringify({ dependencies: { "left-pad": "1.3.0" } }));
  process.env.TMPDIR = dir;
  return {
    dir,
    restore: () => {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
