/**
 * Section 2: provider SDK packaging. For each provider module, compare
 *   (a) bundling the SDK into the function (one self-contained index.mjs), with
 *   (b) a layer: the SDK marked external and loaded from node_modules (what /opt/nodejs/node_modules
 *       would hold), the function bundle then holding only our code.
 * Prints bundle sizes, the layer's on-disk closure, and cold import times of both.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Metafile } from "esbuild";
import { lambdaBuildOptions } from "./esbuild-options";
import { fileSizes, gzipSize, heading, kib, median, mib, note, table, topContributors } from "./report";

interface ProviderCase {
  name: string;
  module: string;
  exportsList: string[];
  sdkPackage: string;
}

const PROVIDERS: ProviderCase[] = [
  { name: "modal", module: "functions/providers/modal/modal-provider", exportsList: ["ModalSandboxProvider", "createModalSdk"], sdkPackage: "modal" },
  { name: "e2b", module: "functions/providers/e2b/e2b-provider", exportsList: ["E2BSandboxProvider", "createE2BSdk"], sdkPackage: "e2b" },
];

const IMPORT_RUNS = 7;

interface BuiltVariant {
  file: string;
  raw: number;
  gzip: number;
  mapGzip: number;
  warnings: string[];
  nativeInputs: string[];
  contributors: string;
  error?: string;
}

async function buildVariant(repoRoot: string, entry: string, outfile: string, external: string[]): Promise<BuiltVariant> {
  try {
    const result = await build(lambdaBuildOptions(repoRoot, entry, outfile, external));
    const js = fileSizes(outfile);
    return {
      file: outfile,
      raw: js.raw,
      gzip: js.gzip,
      mapGzip: fileSizes(`${outfile}.map`).gzip,
      warnings: result.warnings.map((w) => `${w.location?.file ?? ""}:${w.location?.line ?? ""} ${w.text}`),
      nativeInputs: nativeInputsOf(result.metafile),
      contributors: topContributors(result.metafile, 6),
    };
  } catch (err) {
    return { file: outfile, raw: 0, gzip: 0, mapGzip: 0, warnings: [], nativeInputs: [], contributors: "", error: err instanceof Error ? err.message : String(err) };
  }
}

function nativeInputsOf(meta: Metafile | undefined): string[] {
  return Object.keys(meta?.inputs ?? {}).filter((f) => f.endsWith(".node"));
}

// ---- Layer closure: the SDK package plus its production dependencies, as installed. ----

interface PackageInfo {
  name: string;
  dir: string;
  files: number;
  raw: number;
  zip: number;
}

function resolvePackageDir(name: string, fromDir: string, stopAt: string): string | null {
  let dir = fromDir;
  for (;;) {
    const candidate = path.join(dir, "node_modules", name);
    if (existsSync(path.join(candidate, "package.json"))) return candidate;
    if (dir === stopAt || path.dirname(dir) === dir) return null;
    dir = path.dirname(dir);
  }
}

/** Files of a package directory, not descending into its nested node_modules (those are packages of their own). */
function measureDir(dir: string): { files: number; raw: number; zip: number } {
  let files = 0;
  let raw = 0;
  let zip = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules") continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const sub = measureDir(full);
      files += sub.files;
      raw += sub.raw;
      zip += sub.zip;
    } else if (entry.isFile()) {
      files += 1;
      raw += statSync(full).size;
      zip += gzipSize(readFileSync(full));
    }
  }
  return { files, raw, zip };
}

function dependencyClosure(rootPackage: string, repoRoot: string): PackageInfo[] {
  const seen = new Map<string, PackageInfo>();
  const queue: string[] = [];
  const rootDir = resolvePackageDir(rootPackage, repoRoot, repoRoot);
  if (rootDir) queue.push(rootDir);
  while (queue.length > 0) {
    const dir = queue.shift() as string;
    if (seen.has(dir)) continue;
    const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as {
      name?: string;
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
      peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    };
    seen.set(dir, { name: pkg.name ?? path.basename(dir), dir, ...measureDir(dir) });
    const peers = Object.keys(pkg.peerDependencies ?? {}).filter((p) => !pkg.peerDependenciesMeta?.[p]?.optional);
    const deps = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {}), ...peers]);
    for (const dep of deps) {
      const depDir = resolvePackageDir(dep, dir, repoRoot);
      if (depDir && !seen.has(depDir)) queue.push(depDir);
    }
  }
  return [...seen.values()];
}

function sum(packages: PackageInfo[], key: "files" | "raw" | "zip"): number {
  return packages.reduce((a, p) => a + p[key], 0);
}

// ---- Cold import: a fresh node process per run, timing only the import. ----

const IMPORT_SCRIPT =
  "const t = performance.now(); await import(process.env.BENCH_IMPORT_URL); const ms = performance.now() - t; " +
  "console.log(JSON.stringify({ ms, rss: process.memoryUsage().rss }));";

export function importOnce(file: string, cwd: string): Promise<{ ms: number; rss: number }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--input-type=module", "-e", IMPORT_SCRIPT],
      { cwd, env: { ...process.env, BENCH_IMPORT_URL: pathToFileURL(file).href, NODE_OPTIONS: "" }, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${err.message}\n${stderr}`.trim()));
        try {
          resolve(JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as { ms: number; rss: number });
        } catch {
          reject(new Error(`unexpected output: ${stdout} ${stderr}`));
        }
      },
    );
  });
}

interface ImportTiming {
  medianMs: number;
  minMs: number;
  maxMs: number;
  rss: number;
  error?: string;
}

async function timeImports(variants: { key: string; file: string; cwd: string }[]): Promise<Map<string, ImportTiming>> {
  const samples = new Map<string, { ms: number[]; rss: number[]; error?: string }>();
  for (const v of variants) samples.set(v.key, { ms: [], rss: [] });
  // One discarded warm-up run each (equal page cache), then runs interleaved so drift hits all alike.
  for (let run = -1; run < IMPORT_RUNS; run++) {
    for (const v of variants) {
      const s = samples.get(v.key);
      if (!s || s.error) continue;
      try {
        const r = await importOnce(v.file, v.cwd);
        if (run >= 0) {
          s.ms.push(r.ms);
          s.rss.push(r.rss);
        }
      } catch (err) {
        s.error = err instanceof Error ? err.message : String(err);
      }
    }
  }
  const out = new Map<string, ImportTiming>();
  for (const [key, s] of samples) {
    out.set(key, {
      medianMs: median(s.ms),
      minMs: Math.min(...s.ms),
      maxMs: Math.max(...s.ms),
      rss: median(s.rss),
      ...(s.error ? { error: s.error } : {}),
    });
  }
  return out;
}

export interface ProviderPackagingResult {
  provider: string;
  bundled: BuiltVariant;
  layerFn: BuiltVariant;
  closure: PackageInfo[];
  bundledImport: ImportTiming | undefined;
  layerImport: ImportTiming | undefined;
}

export async function benchProviderPackaging(repoRoot: string, tmpDir: string): Promise<ProviderPackagingResult[]> {
  heading("2. Provider SDK packaging: bundle the SDK into the function vs ship it in a layer");
  const bundledDir = path.join(tmpDir, "providers-bundled"); // no node_modules above it: must be self-contained
  const layerDir = path.join(tmpDir, "providers-layer");
  mkdirSync(bundledDir, { recursive: true });
  mkdirSync(layerDir, { recursive: true });
  // Stands in for /opt/nodejs/node_modules: the SDKs resolve from the installed tree.
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(layerDir, "node_modules"), "dir");

  const results: ProviderPackagingResult[] = [];
  const importVariants: { key: string; file: string; cwd: string }[] = [];
  for (const p of PROVIDERS) {
    const entry = path.join(tmpDir, `entry-${p.name}.ts`);
    writeFileSync(entry, `export { ${p.exportsList.join(", ")} } from ${JSON.stringify(path.join(repoRoot, p.module))};\n`);
    const bundled = await buildVariant(repoRoot, entry, path.join(bundledDir, p.name, "index.mjs"), []);
    const layerFn = await buildVariant(repoRoot, entry, path.join(layerDir, p.name, "index.mjs"), [p.sdkPackage]);
    const closure = dependencyClosure(p.sdkPackage, repoRoot);
    results.push({ provider: p.name, bundled, layerFn, closure, bundledImport: undefined, layerImport: undefined });
    if (!bundled.error) importVariants.push({ key: `${p.name}:bundled`, file: bundled.file, cwd: bundledDir });
    if (!layerFn.error) importVariants.push({ key: `${p.name}:layer`, file: layerFn.file, cwd: layerDir });
  }

  console.log("\n   a) Function bundle of a tiny entry re-exporting the provider (+ its create*Sdk)");
  table(
    ["provider", "packaging", "index.mjs", "gzip", "zip≈(js+map gz)", "esbuild warnings", "native .node inputs"],
    results.flatMap((r) =>
      [
        ["SDK bundled", r.bundled],
        ["SDK in layer (external)", r.layerFn],
      ].map(([label, v]) => {
        const b = v as BuiltVariant;
        return b.error
          ? [r.provider, label as string, "BUILD FAILED", b.error.split("\n")[0] ?? "", "", "", ""]
          : [r.provider, label as string, kib(b.raw), kib(b.gzip), kib(b.gzip + b.mapGzip), b.warnings.length, b.nativeInputs.length];
      }),
    ),
  );
  for (const r of results) {
    if (!r.bundled.error) note(`${r.provider} bundled, largest contributors: ${r.bundled.contributors}`);
    for (const b of [r.bundled, r.layerFn]) {
      if (b.error) note(`! ${r.provider}: esbuild could not bundle: ${b.error}`);
      for (const w of b.warnings) note(`! ${r.provider} warning: ${w}`);
      for (const n of b.nativeInputs) note(`! ${r.provider} native module (cannot run on another platform if bundled): ${n}`);
    }
  }

  console.log("\n   b) What a layer would have to hold (package + production dependency closure, as installed)");
  const union = new Map<string, PackageInfo>();
  for (const r of results) for (const pkg of r.closure) union.set(pkg.dir, pkg);
  const closureRow = (label: string, pkgs: PackageInfo[]) => [label, pkgs.length, sum(pkgs, "files"), mib(sum(pkgs, "raw")), mib(sum(pkgs, "zip"))];
  table(
    ["layer content", "packages", "files", "on disk", "zip≈ (per-file gzip)"],
    [...results.map((r) => closureRow(`${r.provider} closure`, r.closure)), closureRow("modal ∪ e2b (one shared layer)", [...union.values()])],
  );
  const heaviest = [...union.values()].sort((a, b) => b.raw - a.raw).slice(0, 8);
  note(`heaviest packages: ${heaviest.map((p) => `${p.name} ${mib(p.raw)}`).join(", ")}`);

  console.log(`\n   c) Cold import in a fresh node process (${IMPORT_RUNS} runs each after 1 warm-up, interleaved; warm page cache)`);
  const timings = await timeImports(importVariants);
  const importRows: (string | number)[][] = [];
  for (const r of results) {
    r.bundledImport = timings.get(`${r.provider}:bundled`);
    r.layerImport = timings.get(`${r.provider}:layer`);
    for (const [label, t] of [
      ["SDK bundled (single index.mjs, no node_modules)", r.bundledImport],
      ["SDK from node_modules (layer layout)", r.layerImport],
    ] as const) {
      if (!t) importRows.push([r.provider, label, "not built", "", "", ""]);
      else if (t.error) importRows.push([r.provider, label, "IMPORT FAILED", t.error.split("\n")[0] ?? "", "", ""]);
      else importRows.push([r.provider, label, `${t.medianMs.toFixed(1)} ms`, `${t.minMs.toFixed(1)} ms`, `${t.maxMs.toFixed(1)} ms`, mib(t.rss)]);
    }
  }
  table(["provider", "variant", "median", "min", "max", "rss after import"], importRows);
  return results;
}
