/** Section 1: every HTTP route's Lambda bundle, built in-process like the CDK stack builds it. */
import path from "node:path";
import { build } from "esbuild";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { lambdaBuildOptions } from "./esbuild-options";
import { fileSizes, heading, kib, note, table, topContributors } from "./report";

export async function benchLambdaBundles(repoRoot: string, tmpDir: string): Promise<void> {
  heading("1. Lambda bundle sizes (esbuild, CDK options: esm, node22, minify, sourcemap, external @aws-sdk/*)");
  const rows: (string | number)[][] = [];
  const contributors: string[] = [];
  for (const route of HTTP_ROUTES) {
    const outfile = path.join(tmpDir, "routes", route.id, "index.mjs");
    const started = performance.now();
    try {
      const result = await build(lambdaBuildOptions(repoRoot, route.entry, outfile));
      const js = fileSizes(outfile);
      const map = fileSizes(`${outfile}.map`);
      const inputs = Object.keys(result.metafile?.inputs ?? {}).length;
      contributors.push(`${route.id}: ${topContributors(result.metafile)}`);
      rows.push([
        route.id,
        route.entry,
        kib(js.raw),
        kib(js.gzip),
        kib(map.raw),
        kib(js.gzip + map.gzip),
        inputs,
        result.warnings.length,
        `${(performance.now() - started).toFixed(0)} ms`,
      ]);
    } catch (err) {
      rows.push([route.id, route.entry, "BUILD FAILED", err instanceof Error ? err.message.split("\n")[0] ?? "" : String(err), "", "", "", "", ""]);
    }
  }
  table(["route", "entry", "index.mjs", "gzip", ".map", "zip≈(js+map gz)", "inputs", "warnings", "build"], rows);
  note("gzip = gzip -9 of index.mjs; the stack sets sourceMap: true, so index.mjs.map ships in the same zip (zip≈ column).");
  note("largest contributors to index.mjs (minified bytes):");
  for (const c of contributors) note(`  ${c}`);
  note("@aws-sdk/* is external (provided by the nodejs22.x runtime) and not counted.");
}
