/**
 * Where Debian's chromium is (the console's browser test and the bench drive it with
 * playwright-core, whose own browser downloads are not reachable): `CHROMIUM_PATH`, else
 * `chromium` on the PATH, else /usr/bin/chromium. Resolved once.
 */
import { execFileSync } from "node:child_process";

export const DEFAULT_CHROMIUM = "/usr/bin/chromium";

let resolved: string | undefined;

export function chromiumPath(): string {
  if (resolved !== undefined) return resolved;
  const fromEnv = process.env.CHROMIUM_PATH?.trim();
  if (fromEnv) return (resolved = fromEnv);
  try {
    const found = execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    if (found) return (resolved = found);
  } catch {
    // Not on the PATH: the Debian package's place.
  }
  return (resolved = DEFAULT_CHROMIUM);
}

/** The flags both drive it with: headless in containers, no background traffic. */
export const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];
