/** Section 1: every Lambda function's bundle (size, cold import) and (1b) the relay image's bundle. */
import { mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { FLOW_STEPS } from "../../functions/flows/steps";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { SEND_INIT_ENTRY, WS_ROUTES } from "../../functions/ws/routes";
import { lambdaBuildOptions } from "./esbuild-options";
import { importOnce } from "./provider-packaging";
import { bytesByPackage, fileSizes, heading, kib, median, ms, note, table, topContributors } from "./report";

/** Every Lambda function of the stack: HTTP routes, WebSocket routes, send-init, flow steps, the schedule target, the sweeper. */
function stackFunctions(): { kind: string; id: string; entry: string }[] {
  return [
    ...HTTP_ROUTES.map((r) => ({ kind: "http", id: r.id, entry: r.entry })),
    ...WS_ROUTES.map((r) => ({ kind: "ws", id: r.id, entry: r.entry })),
    { kind: "ws", id: "SendInit", entry: SEND_INIT_ENTRY },
    ...FLOW_STEPS.map((s) => ({ kind: "step", id: s.id, entry: s.entry })),
    { kind: "schedule", id: "ScheduleFired", entry: "functions/schedules/schedule-fired.ts" },
    { kind: "schedule", id: "Sweeper", entry: "functions/sweeper/sweeper-fired.ts" },
  ];
}

/** Cold import runs per function (a fresh node process each; the median is printed). */
const COLD_IMPORT_RUNS = 3;
/** Targets (issue 13): HTTP and WebSocket route bundles, on the bench machine. */
const ROUTE_BUNDLE_TARGET_BYTES = 300 * 1024;
const ROUTE_COLD_IMPORT_TARGET_MS = 100;

/**
 * Section 1: every function's Lambda bundle, built in-process like the CDK stack builds it, with
 * its cold import time (a fresh node process importing the built index.mjs; @aws-sdk/* resolves
 * from node_modules as the Lambda runtime provides it).
 */
export async function benchLambdaBundles(repoRoot: string, tmpDir: string): Promise<void> {
  heading("1. Lambda bundles per function (esbuild, CDK options: esm, node22, minify, keep-names, sourcemap, external @aws-sdk/*): size and cold import");
  const bundlesDir = path.join(tmpDir, "functions");
  mkdirSync(bundlesDir, { recursive: true });
  // The bundles import @aws-sdk/* (external, as the nodejs22.x runtime provides it).
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(bundlesDir, "node_modules"), "dir");
  const rows: (string | number)[][] = [];
  const contributors: string[] = [];
  for (const fn of stackFunctions()) {
    const outfile = path.join(bundlesDir, fn.id, "index.mjs");
    try {
      const result = await build(lambdaBuildOptions(repoRoot, fn.entry, outfile));
      const js = fileSizes(outfile);
      const map = fileSizes(`${outfile}.map`);
      const times: number[] = [];
      let importError = "";
      for (let run = 0; run < COLD_IMPORT_RUNS; run++) {
        try {
          times.push((await importOnce(outfile, path.dirname(outfile))).ms);
        } catch (err) {
          importError = err instanceof Error ? (err.message.split("\n")[0] ?? "") : String(err);
          break;
        }
      }
      const cold = times.length ? median(times) : NaN;
      const isRoute = fn.kind === "http" || fn.kind === "ws";
      const target = isRoute ? (js.raw < ROUTE_BUNDLE_TARGET_BYTES && cold < ROUTE_COLD_IMPORT_TARGET_MS ? "yes" : "NO") : "";
      contributors.push(`${fn.id}: ${topContributors(result.metafile)}`);
      rows.push([fn.kind, fn.id, kib(js.raw), kib(js.gzip), kib(js.gzip + map.gzip), importError ? `FAILED: ${importError}` : ms(cold), target]);
    } catch (err) {
      rows.push([fn.kind, fn.id, "BUILD FAILED", err instanceof Error ? (err.message.split("\n")[0] ?? "") : String(err), "", "", ""]);
    }
  }
  table(["kind", "function", "index.mjs", "gzip", "zip≈(js+map gz)", `cold import (median of ${COLD_IMPORT_RUNS})`, "route target met"], rows);
  note(`route target: HTTP and WebSocket route bundles under ${kib(ROUTE_BUNDLE_TARGET_BYTES)} and cold import under ${ROUTE_COLD_IMPORT_TARGET_MS} ms (issue 13); only the routes that call a sandbox provider (awsProviders) bundle the provider SDKs.`);
  note("gzip = gzip -9 of index.mjs; the stack sets sourceMap: true, so index.mjs.map ships in the same zip (zip≈ column). Cold import = `await import(index.mjs)` in a fresh node process on this machine (module evaluation only, no handler call).");
  note("largest contributors to index.mjs (minified bytes):");
  for (const c of contributors) note(`  ${c}`);
  note("@aws-sdk/* is external (provided by the nodejs22.x runtime) and not counted in the size; its load is in the cold import time.");
  note("what a cold import loads: the DynamoDB SDK by require (functions/store/dynamodb-sdk.ts); every other AWS SDK client (functions/adapters/aws/sdk-client.ts)");
  note("and OpenCode's client (functions/agent/opencode-sdk.ts) load on first use, so their cost is on the first call that needs them, not here.");
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
