/**
 * Section "clients" (issue 20): the typed client's browser bundle (minified, gzip), the OpenAPI
 * document (size, generation time), the document Lambda's bundle and cold import (as the CDK
 * stack builds it), and the CLI's start (`sbxctl --help` through tsx, median of 5).
 */
import { execFile } from "node:child_process";
import { mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import { openApiDocument } from "../../functions/contract/openapi";
import { servedRoutes } from "../../functions/api-docs/served-routes";
import { lambdaBuildOptions } from "./esbuild-options";
import { importOnce } from "./provider-packaging";
import { fileSizes, gzipSize, heading, kib, median, ms, note, table, topContributors } from "./report";

const RUNS = 5;

export async function benchClients(repoRoot: string, tmpDir: string): Promise<void> {
  heading("Clients (issue 20): typed client bundle, OpenAPI document, CLI start");
  const dir = path.join(tmpDir, "clients");
  mkdirSync(dir, { recursive: true });
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"), "dir");

  const browser = await build({ absWorkingDir: repoRoot, entryPoints: ["clients/api-client/index.ts"], bundle: true, write: false, platform: "browser", format: "esm", minify: true, target: "es2022", logLevel: "silent" });
  const js = browser.outputFiles[0]?.contents ?? new Uint8Array();
  const rows: (string | number)[][] = [["typed client (browser, minified)", kib(js.length), kib(gzipSize(Buffer.from(js))), "-"]];

  const times: number[] = [];
  let size = 0;
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    size = JSON.stringify(openApiDocument(servedRoutes())).length;
    times.push(performance.now() - started);
  }
  rows.push(["OpenAPI document (JSON)", kib(size), "-", `${ms(median(times))} to generate (median of ${RUNS}; first ${ms(times[0] ?? 0)})`]);

  const outfile = path.join(dir, "OpenApiDocument", "index.mjs");
  const result = await build(lambdaBuildOptions(repoRoot, "functions/api-docs/openapi-entry.ts", outfile));
  const fn = fileSizes(outfile);
  const cold: number[] = [];
  for (let i = 0; i < RUNS; i++) cold.push((await importOnce(outfile, path.dirname(outfile))).ms);
  rows.push(["OpenApiDocument Lambda index.mjs", kib(fn.raw), kib(fn.gzip), `cold import ${ms(median(cold))} (median of ${RUNS})`]);

  const cli: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await promisify(execFile)(process.execPath, [path.join(repoRoot, "clients/cli/bin.mjs"), "--help"], { cwd: repoRoot });
    cli.push(performance.now() - started);
  }
  rows.push(["sbxctl --help (process start to exit)", "-", "-", `${ms(median(cli))} (median of ${RUNS})`]);
  table(["artifact", "size", "gzip", "time"], rows);
  note(`OpenApiDocument: ${topContributors(result.metafile)}`);
  note("first figures (this section is new with issue 20); the console's own bundle is i20b's.");
}
