/**
 * Section 14: the web console (issue 20): its files as served (minified; gzip as a CDN sends
 * them), the total a first visit downloads without the terminal (target under 150 KB gzipped),
 * the terminal bundle loaded on demand, the build time, and the time headless chromium takes to
 * show the sign-in form from the local runtime (when Debian's chromium is installed).
 */
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { buildConsole, isTerminalFile } from "../../infra/console-build";
import { startLocalRuntime } from "../../infra/local/runtime";
import { gzipSize, heading, kib, median, ms, note, table } from "./report";
import { CHROMIUM_ARGS, chromiumPath } from "../support/chromium";

const TARGET_GZIP_BYTES = 150 * 1024;
const LOAD_RUNS = 5;

export async function benchConsole(): Promise<void> {
  heading("14. Web console: bundle sizes (esbuild, minified; gzip) and first load in headless chromium");
  const builds: number[] = [];
  let files = await buildConsole();
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    files = await buildConsole();
    builds.push(performance.now() - t);
  }
  const rows = files.map((f) => [f.path, kib(f.body.length), kib(gzipSize(f.body)), isTerminalFile(f.path) ? "on demand (terminal)" : "first load"]);
  table(["file", "raw", "gzip", "loaded"], rows);
  const first = files.filter((f) => !isTerminalFile(f.path));
  const firstGzip = first.reduce((a, f) => a + gzipSize(f.body), 0);
  const terminalGzip = files.filter((f) => isTerminalFile(f.path)).reduce((a, f) => a + gzipSize(f.body), 0);
  note(`first load without the terminal: ${kib(firstGzip)} gzipped (target < ${kib(TARGET_GZIP_BYTES)}: ${firstGzip < TARGET_GZIP_BYTES ? "met" : "MISSED"}); the terminal adds ${kib(terminalGzip)} when opened`);
  note(`build (esbuild, both bundles): median ${ms(median(builds))} over ${builds.length} builds`);

  const CHROMIUM = chromiumPath();
  if (!existsSync(CHROMIUM)) {
    note(`first load: skipped, no chromium at ${CHROMIUM} (node scripts/ensure-deps.mjs --browser installs it)`);
    return;
  }
  const runtime = await startLocalRuntime({ port: 0 });
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  try {
    const loads: number[] = [];
    for (let i = 0; i <= LOAD_RUNS; i++) {
      const context = await browser.newContext();
      const page = await context.newPage();
      const t = performance.now();
      await page.goto(`${runtime.url}/`);
      await page.locator("input[name=token]").waitFor();
      if (i > 0) loads.push(performance.now() - t); // the first load builds the console in the runtime
      await context.close();
    }
    note(`navigation to the sign-in form (local runtime, cold browser cache): median ${ms(median(loads))} over ${loads.length} loads`);
  } finally {
    await browser.close();
    await runtime.close();
  }
}
