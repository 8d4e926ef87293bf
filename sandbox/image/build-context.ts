/**
 * Prepares the image's build context: the Dockerfile, Caddyfile and start-services.sh from
 * this directory, plus `dist/` with the boot, sidecar and CLI bundled by esbuild (one ESM file
 * each) and a `package.json` pinning the runtime modules the bundles leave external. The same
 * directory feeds `docker build`, Modal (modal-image.ts) and E2B (e2b-template.ts), and its
 * files are the inputs of the version key.
 */
import { chmod, copyFile, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { parseDockerfile } from "./dockerfile";
import { imageVersionKey } from "./version-key";

const here = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = resolve(here, "../..");
export const IMAGE_SOURCE_DIR = here;

/** Files copied as they are (mode kept: start-services.sh is executable). */
const STATIC_FILES = ["Dockerfile", "Caddyfile", "start-services.sh"] as const;

/** Bundles: entry (relative to the repository) → file under dist/. A missing entry is skipped (components land independently). */
const BUNDLES = [
  { entry: "sandbox/boot/main.ts", out: "boot.mjs", required: true },
  { entry: "sandbox/sidecar/main.ts", out: "sidecar.mjs", required: false },
  { entry: "sandbox/cli/main.ts", out: "cli.mjs", required: false },
] as const;

/**
 * Left out of the bundles and installed in the image at the lock file's versions: zod (every
 * bundle and the agent tools import it; once on disk beats three inlined copies) and the
 * terminal's native PTY (cannot be bundled).
 */
export const RUNTIME_MODULES = ["zod", "@lydell/node-pty"] as const;
/** Optional native speed-ups `ws` probes for; absent is fine. */
const OPTIONAL_EXTERNALS = ["bufferutil", "utf-8-validate"];

export interface ImageContext {
  dir: string;
  /** Every file, relative and `/`-separated, sorted. */
  files: string[];
  versionKey: string;
}

async function listFiles(dir: string, base = dir): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await listFiles(full, base)));
    else out.push(relative(base, full).split("\\").join("/"));
  }
  return out.sort();
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Exact versions of the runtime modules, from the repository's lock file. */
export async function runtimePackageJson(repoRoot: string): Promise<string> {
  const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string }> };
  const dependencies: Record<string, string> = {};
  for (const name of RUNTIME_MODULES) {
    const version = lock.packages[`node_modules/${name}`]?.version;
    if (!version) throw new Error(`package-lock.json has no ${name}: the image cannot pin it`);
    dependencies[name] = version;
  }
  return `${JSON.stringify({ name: "sandbox-runtime", private: true, type: "module", dependencies }, null, 2)}\n`;
}

/** Reads a prepared context and computes its version key. */
export async function readImageContext(dir: string): Promise<ImageContext> {
  const files = await listFiles(dir);
  const contents = await Promise.all(files.map(async (path) => ({ path, content: await readFile(join(dir, path)) })));
  return { dir, files, versionKey: imageVersionKey(contents) };
}

/** Builds the context into `outDir` (emptied first). Deterministic: the same sources give the same files. */
export async function buildImageContext(outDir: string, options: { repoRoot?: string } = {}): Promise<ImageContext> {
  const repoRoot = options.repoRoot ?? REPO_ROOT;
  const dir = resolve(outDir);
  await rm(dir, { recursive: true, force: true });
  await mkdir(join(dir, "dist"), { recursive: true });
  for (const name of STATIC_FILES) {
    const src = join(IMAGE_SOURCE_DIR, name);
    await copyFile(src, join(dir, name));
    await chmod(join(dir, name), (await stat(src)).mode & 0o777);
  }
  for (const bundle of BUNDLES) {
    const entry = join(repoRoot, bundle.entry);
    if (!(await exists(entry))) {
      if (bundle.required) throw new Error(`${bundle.entry} is missing`);
      continue;
    }
    await build({
      entryPoints: [entry],
      outfile: join(dir, "dist", bundle.out),
      bundle: true,
      platform: "node",
      target: "node20",
      format: "esm",
      minify: true,
      legalComments: "none",
      external: [...RUNTIME_MODULES, ...OPTIONAL_EXTERNALS],
      // CommonJS dependencies inlined into ESM still call `require` (as in the relay image).
      banner: { js: "import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);" },
      logLevel: "error",
    });
  }
  await writeFile(join(dir, "dist", "package.json"), await runtimePackageJson(repoRoot));
  // The Dockerfile must still parse: a broken one should fail here, not in a remote builder.
  parseDockerfile(await readFile(join(dir, "Dockerfile"), "utf8"));
  return readImageContext(dir);
}
