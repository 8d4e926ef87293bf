/** Small printing and statistics helpers for the benchmark (figures only, never assertions). */
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

export function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

export function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** gzip -9 size of a buffer: a close proxy for its deflate size inside a Lambda zip. */
export function gzipSize(data: Buffer | string): number {
  return gzipSync(data, { level: 9 }).length;
}

export function fileSizes(file: string): { raw: number; gzip: number } {
  const data = readFileSync(file);
  return { raw: data.length, gzip: gzipSize(data) };
}

export function heading(title: string): void {
  console.log(`\n== ${title} ${"=".repeat(Math.max(0, 96 - title.length))}`);
}

export function note(text: string): void {
  console.log(`   ${text}`);
}

/** Prints rows as an aligned table; numeric-looking cells are right-aligned. */
export function table(headers: string[], rows: (string | number)[][]): void {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, c) => Math.max(...cells.map((r) => (r[c] ?? "").length)));
  const numeric = /^[-+]?[\d.,]+( ?(KiB|MiB|ms|%|\/s|x))?$|^\$/;
  const line = (r: string[]) =>
    "   " +
    r
      .map((v, c) => (numeric.test(v) && c > 0 ? v.padStart(widths[c] ?? 0) : v.padEnd(widths[c] ?? 0)))
      .join("  ")
      .trimEnd();
  console.log(line(headers));
  console.log("   " + widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of cells.slice(1)) console.log(line(r));
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

export function mean(values: number[]): number {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : Number.NaN;
}

export function ms(value: number): string {
  return `${value.toFixed(2)} ms`;
}

/** The largest contributors to an esbuild output, grouped by npm package (or "our code"). */
type Metafile = { outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }> } | undefined;

/** Minified bytes in the output per npm package ("(our code)" for the rest). */
export function bytesByPackage(meta: Metafile): Map<string, number> {
  const byPackage = new Map<string, number>();
  for (const output of Object.values(meta?.outputs ?? {})) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input.slice(input.lastIndexOf("node_modules/")));
      const key = match?.[1] ?? "(our code)";
      byPackage.set(key, (byPackage.get(key) ?? 0) + bytesInOutput);
    }
  }
  return byPackage;
}

export function topContributors(meta: Metafile, count = 5): string {
  return [...bytesByPackage(meta).entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([k, v]) => `${k} ${kib(v)}`)
    .join(", ");
}
