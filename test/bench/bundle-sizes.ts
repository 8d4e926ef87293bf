/** Section 1: every HTTP route's Lambda bundle, built in-process like the CDK stack builds it. */
import path from "node:path";
import { build } from "esbuild";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { lambdaBuildOptions } from "./esbuild-options";
import { bytesByPackage, fileSizes, heading, kib, note, table, topContributors } from "./report";

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

/**
 * The relay image's bundle before issue 21 (hand-written OpenCode client and SSE parser), built
 * the same way on the same tree minus that change: the figure the libraries are measured against.
 */
const RELAY_BUNDLE_BEFORE_ISSUE_21 = { raw: 1_264_165, gzip: 325_425 };
/** What issue 21 brought into the relay: OpenCode's generated client and the SSE parser. */
const ISSUE_21_PACKAGES = ["@opencode-ai/sdk", "eventsource-parser"];

/** Section 1b: the relay image's single-file bundle (infra/relay/Dockerfile: every dependency inside, @aws-sdk included). */
export async function benchRelayBundle(repoRoot: string, tmpDir: string): Promise<void> {
  heading("1b. Relay bundle (infra/relay/Dockerfile: esbuild, esm, node22, minify, nothing external)");
  const outfile = path.join(tmpDir, "relay", "relay.mjs");
  const result = await build({ ...lambdaBuildOptions(repoRoot, "functions/relay/main.ts", outfile), external: [] });
  const js = fileSizes(outfile);
  const byPackage = bytesByPackage(result.metafile);
  const pct = (now: number, before: number) => `${(((now - before) / before) * 100).toFixed(1)}%`;
  table(
    ["bundle", "relay.mjs", "gzip", "change (raw)", "change (gzip)"],
    [
      ["before issue 21 (hand-written client + SSE parser)", kib(RELAY_BUNDLE_BEFORE_ISSUE_21.raw), kib(RELAY_BUNDLE_BEFORE_ISSUE_21.gzip), "", ""],
      ["now", kib(js.raw), kib(js.gzip), pct(js.raw, RELAY_BUNDLE_BEFORE_ISSUE_21.raw), pct(js.gzip, RELAY_BUNDLE_BEFORE_ISSUE_21.gzip)],
    ],
  );
  note(`of which ${ISSUE_21_PACKAGES.map((p) => `${p} ${kib(byPackage.get(p) ?? 0)}`).join(", ")} (minified bytes); budget: +5%.`);
  note(`largest contributors: ${topContributors(result.metafile)}`);
}
