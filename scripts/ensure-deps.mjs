// Runs before `npm start`, `npm test` and `npm run bench`, so a fresh clone needs no extra step:
// - the `sqlite3` CLI (the local provider copies and repoints OpenCode's database with it) must be
//   on PATH; when it is missing and this runs as root with apt-get (a fresh CI machine), it is
//   installed with `apt-get install -y sqlite3`, otherwise this fails saying how to install it;
// - with `--browser` (before `npm test`): Debian's `chromium` for the console's browser test, the
//   same way (Playwright's own browser download is not reachable from CI machines); when it cannot
//   be installed the browser test fails saying so, the rest of the suite runs;
// - installs the locked dependencies when node_modules is missing or was installed from another
//   package-lock.json. (`npm ci` is not used: npm 11 drops other platforms' optional packages from
//   the lock file and then refuses it; `npm install` with the lock file installs the same locked
//   versions.)
import { createHash } from "node:crypto";
import { execFileSync, execSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const works = (command, args) => spawnSync(command, args, { stdio: "ignore" }).status === 0;

let aptUpdated = false;

/** Installs a Debian package with apt-get when this runs as root on a machine that has it. */
function aptInstall(pkg) {
  if (process.getuid?.() !== 0 || !works("apt-get", ["--version"])) return;
  console.log(`[ensure-deps] ${pkg} is missing: installing it (apt-get install -y ${pkg})...`);
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    if (!aptUpdated) execFileSync("apt-get", ["update"], { stdio: "inherit", env });
    aptUpdated = true;
    execFileSync("apt-get", ["install", "-y", "--no-install-recommends", pkg], { stdio: "inherit", env });
  } catch (err) {
    console.error(`[ensure-deps] apt-get could not install ${pkg}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function ensureSqlite3() {
  if (works("sqlite3", ["--version"])) return;
  aptInstall("sqlite3");
  if (works("sqlite3", ["--version"])) return;
  console.error(
    "[ensure-deps] the sqlite3 CLI is required (the local sandbox provider snapshots and restores OpenCode's database with it) " +
      "and `sqlite3 --version` did not run. Install it (Debian/Ubuntu: sudo apt-get install -y sqlite3; macOS: brew install sqlite) and run again.",
  );
  process.exit(1);
}

function ensureNodeModules() {
  const lockHash = () => createHash("sha256").update(readFileSync("package-lock.json")).digest("hex");
  const want = lockHash();
  const stamp = "node_modules/.lock-hash";
  const have = existsSync(stamp) ? readFileSync(stamp, "utf8").trim() : "";
  if (have !== want) {
    console.log("[ensure-deps] installing locked dependencies (npm install from package-lock.json)...");
    execSync("npm install --no-audit --no-fund", { stdio: "inherit" });
    writeFileSync(stamp, lockHash());
  }
}

function ensureChromium() {
  // The same places test/support/chromium.ts looks: CHROMIUM_PATH, `chromium` on the PATH, /usr/bin/chromium.
  if ((process.env.CHROMIUM_PATH && existsSync(process.env.CHROMIUM_PATH)) || existsSync("/usr/bin/chromium") || works("chromium", ["--version"])) return;
  aptInstall("chromium");
}

ensureSqlite3();
if (process.argv.includes("--browser")) ensureChromium();
ensureNodeModules();
