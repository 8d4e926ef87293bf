// Runs before `npm start`, `npm test` and `npm run bench`: installs the locked dependencies when
// node_modules is missing or was installed from another package-lock.json, so a fresh clone needs no
// extra step. (`npm ci` is not used: npm 11 drops other platforms' optional packages from the lock
// file and then refuses it; `npm install` with the lock file installs the same locked versions.)
import { createHash } from "node:crypto";
import { execSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const lockHash = () => createHash("sha256").update(readFileSync("package-lock.json")).digest("hex");
const want = lockHash();
const stamp = "node_modules/.lock-hash";
const have = existsSync(stamp) ? readFileSync(stamp, "utf8").trim() : "";
if (have !== want) {
  console.log("[ensure-deps] installing locked dependencies (npm install from package-lock.json)...");
  execSync("npm install --no-audit --no-fund", { stdio: "inherit" });
  writeFileSync(stamp, lockHash());
}
