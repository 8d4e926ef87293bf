/**
 * Builds the web console (clients/console) with esbuild, in memory: the local runtime serves the
 * result at `/` (infra/local/console-routes.ts), the stack writes it to a directory for its
 * static-site bucket (infra/console-stack.ts), the bench reports its size. Nothing built is
 * committed. Layout (the same locally and in S3):
 *
 * - `index.html`
 * - `console/app.js`, `console/app.css`: the console (Preact);
 * - `console/terminal.js`, `console/terminal.css`: the sidecar terminal (xterm.js), a separate
 *   bundle the console loads only when a user opens a terminal;
 * - `console/config.json`: `{apiUrl, wsUrl}` (written by whoever serves it, not built here).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, buildSync, type BuildOptions, type OutputFile } from "esbuild";

const CONSOLE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../clients/console");

export interface ConsoleFile {
  path: string;
  contentType: string;
  body: Buffer;
}

export interface ConsoleConfigJson {
  /** "" = the page's own origin. */
  apiUrl: string;
  wsUrl: string | null;
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
};

export function contentTypeOf(path: string): string {
  const ext = path.slice(path.lastIndexOf("."));
  return CONTENT_TYPES[ext] ?? "application/octet-stream";
}

const OPTIONS: BuildOptions = {
  entryPoints: { app: join(CONSOLE_DIR, "app.ts"), terminal: join(CONSOLE_DIR, "terminal.ts") },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  outdir: "/console",
  write: false,
  logLevel: "silent",
  legalComments: "none",
  define: { "process.env.NODE_ENV": '"production"' },
};

function consoleFiles(outputs: OutputFile[]): ConsoleFile[] {
  const files: ConsoleFile[] = outputs.map((f) => {
    const path = `console/${f.path.slice(f.path.lastIndexOf("/") + 1)}`;
    return { path, contentType: contentTypeOf(path), body: Buffer.from(f.contents) };
  });
  files.push({ path: "index.html", contentType: contentTypeOf("index.html"), body: readFileSync(join(CONSOLE_DIR, "index.html")) });
  files.push({ path: "console/app.css", contentType: contentTypeOf("app.css"), body: readFileSync(join(CONSOLE_DIR, "app.css")) });
  return files;
}

/** The console's files, minified. */
export async function buildConsole(): Promise<ConsoleFile[]> {
  return consoleFiles((await build(OPTIONS)).outputFiles ?? []);
}

/** The same, synchronously (the stack builds it during a synchronous synth). */
export function buildConsoleSync(): ConsoleFile[] {
  return consoleFiles(buildSync(OPTIONS).outputFiles ?? []);
}

/** Whether a built file belongs to the terminal bundle (not counted in the console's size budget). */
export function isTerminalFile(path: string): boolean {
  return path.startsWith("console/terminal.");
}

/** Writes the console to `dir` (the stack's static-site asset), without config.json. */
export function writeConsoleSync(dir: string): void {
  for (const file of buildConsoleSync()) {
    const target = join(dir, file.path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, file.body);
  }
}
