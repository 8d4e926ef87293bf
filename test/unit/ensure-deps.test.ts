/**
 * `scripts/ensure-deps.mjs` (run before `npm start` and `npm test`) requires the sqlite3 CLI: it
 * installs it with apt-get when it runs as root on a machine that has apt-get (a fresh CI
 * machine), and otherwise fails naming sqlite3. Run as a real process, with a PATH that holds only
 * `node` and the fakes each test puts there, in a directory whose dependencies are up to date.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const SCRIPT = resolve("scripts/ensure-deps.mjs");
let dir: string;
let bin: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "ensure-deps-"));
  bin = join(dir, "bin");
  await mkdir(bin);
  await symlink(process.execPath, join(bin, "node"));
  // Dependencies already installed from this lock file: the npm step has nothing to do.
  const lock = "{}";
  await writeFile(join(dir, "package-lock.json"), lock);
  await mkdir(join(dir, "node_modules"));
  await writeFile(join(dir, "node_modules", ".lock-hash"), createHash("sha256").update(lock).digest("hex"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fake(name: string, script: string): Promise<void> {
  await writeFile(join(bin, name), `#!/bin/sh\n${script}\n`);
  await chmod(join(bin, name), 0o755);
}

function ensureDeps() {
  return spawnSync(process.execPath, [SCRIPT], { cwd: dir, env: { PATH: bin, HOME: dir }, encoding: "utf8" });
}

const isRoot = process.getuid?.() === 0;

describe("ensure-deps: the sqlite3 CLI", () => {
  it("present: nothing to do", async () => {
    await fake("sqlite3", 'echo "3.40.1"');
    const run = ensureDeps();
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  it("missing, no apt-get: fails with a message naming sqlite3 and how to install it", () => {
    const run = ensureDeps();
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/the sqlite3 CLI is required/);
    expect(run.stderr).toMatch(/apt-get install -y sqlite3/);
  });

  it(`missing, apt-get present: ${isRoot ? "as root, apt-get update then apt-get install -y sqlite3" : "not root, fails without calling apt-get"}`, async () => {
    const calls = join(dir, "apt-calls");
    // The fake apt-get records its arguments; `install` puts a working sqlite3 on PATH.
    await fake(
      "apt-get",
      [
        `[ "$1" = "--version" ] && exit 0`,
        `echo "$DEBIAN_FRONTEND $*" >> ${calls}`,
        `[ "$1" = "install" ] && printf '#!/bin/sh\\necho 3.40.1\\n' > ${join(bin, "sqlite3")} && /bin/chmod 755 ${join(bin, "sqlite3")}`,
        "exit 0",
      ].join("\n"),
    );
    const run = ensureDeps();
    const recorded = await readFile(calls, "utf8").catch(() => "");
    if (isRoot) {
      expect(run.status).toBe(0);
      expect(recorded.trim().split("\n")).toEqual(["noninteractive update", "noninteractive install -y --no-install-recommends sqlite3"]);
    } else {
      expect(run.status).toBe(1);
      expect(recorded).toBe("");
      expect(run.stderr).toMatch(/the sqlite3 CLI is required/);
    }
  });

  it("apt-get that cannot install it: fails naming sqlite3", async () => {
    await fake("apt-get", '[ "$1" = "--version" ] && exit 0\nexit 100');
    const run = ensureDeps();
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/the sqlite3 CLI is required/);
  });
});
