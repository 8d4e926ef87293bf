/**
 * What a built Lambda bundle (index.mjs) imports, and what importing it loads: the deterministic
 * side of the cold-import target (issue 13; the times are in `npm run bench`, section 1).
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import { REPO_ROOT } from "../../infra/handler-function";

/** A bundle's imports by kind, as esbuild reads them from the built file (bundled code is not re-read: packages are external). */
export async function bundleImports(file: string): Promise<{ statements: string[]; dynamic: string[] }> {
  const result = await build({ entryPoints: [file], bundle: true, write: false, platform: "node", format: "esm", packages: "external", metafile: true, logLevel: "silent" });
  const imports = Object.values(result.metafile.inputs).flatMap((input) => input.imports);
  const paths = (kind: string) => [...new Set(imports.filter((i) => i.kind === kind).map((i) => i.path))].sort();
  return { statements: paths("import-statement"), dynamic: paths("dynamic-import") };
}

/** What `await import(index.mjs)` loads in a fresh Node process: the `@aws-sdk/*` packages, and whether Node's fetch (undici) was loaded. */
export interface ImportLoads {
  awsSdkPackages: string[];
  fetchLoaded: boolean;
}

// In the child: the CommonJS module cache holds every SDK file loaded (by `require` or by `import`);
// `process.moduleLoadList` names the internal modules loaded, undici among them once fetch is touched.
const PROBE =
  "import { createRequire } from 'node:module';" +
  "await import(process.env.BUNDLE_URL);" +
  "const cache = createRequire(process.cwd() + '/').cache;" +
  "const pkgs = new Set(Object.keys(cache).map((f) => /node_modules\\/(@aws-sdk\\/[^/]+)\\//.exec(f)?.[1]).filter(Boolean));" +
  "console.log(JSON.stringify({ awsSdkPackages: [...pkgs].sort(), fetchLoaded: process.moduleLoadList.some((m) => m.includes('undici')) }));";

const run = promisify(execFile);

/**
 * Imports each bundle in its own fresh Node process (no handler call), the repository's
 * node_modules standing in for the Lambda runtime's `@aws-sdk/*`. Bundles are copied first so the
 * asset directories stay untouched.
 */
export async function importLoads(files: Record<string, string>): Promise<Record<string, ImportLoads>> {
  const dir = mkdtempSync(path.join(tmpdir(), "bundle-imports-"));
  try {
    symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
    const out: Record<string, ImportLoads> = {};
    for (const [id, file] of Object.entries(files)) {
      const copy = path.join(dir, id, "index.mjs");
      mkdirSync(path.dirname(copy));
      copyFileSync(file, copy);
      const { stdout } = await run(process.execPath, ["--input-type=module", "-e", PROBE], {
        cwd: path.dirname(copy),
        env: { ...process.env, BUNDLE_URL: pathToFileURL(copy).href, NODE_OPTIONS: "" },
        timeout: 60_000,
      });
      out[id] = JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as ImportLoads;
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
