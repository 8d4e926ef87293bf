/**
 * What runs inside a cloud stand-in's sandbox (the E2B and Modal stand-ins share it): a
 * filesystem that is a real directory on this machine, real commands, and the image's boot as
 * its documented effects (sandbox/boot/main.ts):
 *
 * - `boot start --spec F|-` reads and removes the key file and starts OpenCode, Caddy and the
 *   sidecar (here: a record of them, with the key OpenCode's password derives from). If they
 *   already run (a sandbox that came back with its memory), their ports are taken: the start
 *   fails as the real boot's would;
 * - the restored-boot stop script ends them; `boot resume` (git freshness) does nothing here;
 * - the few shell commands the providers use to write files (`writeFileViaExec`, `chmod 600`,
 *   the `jq` env export) act on the sandbox's filesystem. Any other command runs for real with
 *   `sh -c`, in the sandbox's directory (an absolute `cwd` maps under it).
 *
 * A memory snapshot copies the directory and the processes; a filesystem snapshot only the
 * directory. `fetch` answers as the sandbox's tunnels would: OpenCode's `/session` with 200 for
 * the password derived from the key its boot got, 401 otherwise, and no answer while nothing
 * listens; the sidecar's open `/health` through the preview proxy.
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseBootSpec } from "../../../sandbox/boot/boot-spec";
import { agentAuthorization, deriveAgentPassword } from "../../../sandbox/shared/access-token";
import { SANDBOX_PATHS } from "../../../functions/providers/sandbox-boot";

export interface StandInProcesses {
  /** The key the boot read from its key file (null: booted without one, no password). */
  key: string | null;
  sessionId: string;
  /** How many times a boot started them (a restart shows as a higher count). */
  generation: number;
}

export interface ExecOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
}

const roots: string[] = [];

/** Removes every stand-in sandbox directory this process made. */
export function removeStandInRoots(): void {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
}

export class StandInMachine {
  readonly root: string;
  processes: StandInProcesses | null = null;
  /** Every command the sandbox was asked to run, as text. */
  readonly commands: string[] = [];
  private generation = 0;

  constructor(from?: { root: string; processes: StandInProcesses | null }) {
    this.root = mkdtempSync(join(tmpdir(), "standin-sandbox-"));
    roots.push(this.root);
    if (from) {
      cpSync(from.root, this.root, { recursive: true });
      this.processes = from.processes ? { ...from.processes } : null;
      this.generation = from.processes?.generation ?? 0;
    }
  }

  /** A copy of this machine: its directory, and its processes when `memory`. */
  image(memory: boolean): { root: string; processes: StandInProcesses | null } {
    const copy = mkdtempSync(join(tmpdir(), "standin-image-"));
    roots.push(copy);
    cpSync(this.root, copy, { recursive: true });
    return { root: copy, processes: memory && this.processes ? { ...this.processes } : null };
  }

  path(sandboxPath: string): string {
    return join(this.root, sandboxPath);
  }

  writeFile(sandboxPath: string, content: string): void {
    mkdirSync(dirname(this.path(sandboxPath)), { recursive: true });
    writeFileSync(this.path(sandboxPath), content);
  }

  readFile(sandboxPath: string): string | null {
    return existsSync(this.path(sandboxPath)) ? readFileSync(this.path(sandboxPath), "utf8") : null;
  }

  /** The processes die with the sandbox (terminate, kill, expiry without pause). */
  halt(): void {
    this.processes = null;
  }

  async exec(argv: string[], opts: { cwd?: string; timeoutMs?: number; stdin?: string } = {}): Promise<ExecOutcome> {
    const text = argv.join(" ");
    this.commands.push(text);
    const [cmd, entry, mode, flag, specArg] = argv;
    if (cmd === "node" && entry === SANDBOX_PATHS.bootEntry && flag === "--spec" && specArg) {
      if (mode === "resume") return ok();
      if (mode === "start") return this.bootStart(specArg === "-" ? (opts.stdin ?? "") : (this.readFile(specArg) ?? ""));
    }
    const script = argv[0] === "sh" && argv[1] === "-c" ? (argv[2] ?? "") : null;
    if (script !== null) {
      if (script.includes("[b]oot.mjs run")) {
        this.processes = null;
        return ok();
      }
      const write = /^umask 077 && mkdir -p '([^']+)' && cat > '([^']+)'$/.exec(script);
      if (write?.[2]) {
        this.writeFile(write[2], opts.stdin ?? "");
        return ok();
      }
      if (script.startsWith("jq -r ")) {
        const env = JSON.parse(this.readFile(SANDBOX_PATHS.envJson) ?? "{}") as Record<string, string>;
        this.writeFile(SANDBOX_PATHS.envProfile, Object.entries(env).map(([k, v]) => `export ${k}='${v}'\n`).join(""));
        return ok();
      }
    }
    if (cmd === "chmod" && argv[1] === "600") return ok();
    return this.runForReal(argv, opts);
  }

  /** What the sandbox's tunnels answer (`null`: nothing listens, the connection fails). */
  answer(port: "opencode" | "preview", path: string, headers: Record<string, string> | undefined): number | null {
    const p = this.processes;
    if (!p) return null;
    if (port === "opencode") {
      if (!path.startsWith("/session")) return 404;
      if (p.key === null) return 200;
      return headers?.authorization === agentAuthorization(deriveAgentPassword(p.key)) ? 200 : 401;
    }
    return path === "/_sandbox/sidecar/health" ? 200 : 404;
  }

  private bootStart(rawSpec: string): ExecOutcome {
    let sessionId: string;
    try {
      sessionId = parseBootSpec(JSON.parse(rawSpec)).request.sessionId;
    } catch (err) {
      return fail("read spec", String(err));
    }
    // The boot takes its key file before anything starts.
    const key = this.readFile(SANDBOX_PATHS.sandboxKey);
    if (key !== null) rmSync(this.path(SANDBOX_PATHS.sandboxKey));
    if (this.processes) return fail("start opencode", "opencode exited: listen EADDRINUSE: address already in use 0.0.0.0:4096");
    this.generation += 1;
    this.processes = { key, sessionId, generation: this.generation };
    return { stdout: `${JSON.stringify({ type: "boot.ready" })}\n`, stderr: "", exitCode: 0 };
  }

  private runForReal(argv: string[], opts: { cwd?: string; timeoutMs?: number }): Promise<ExecOutcome> {
    const cwd = this.path(opts.cwd ?? SANDBOX_PATHS.workspace);
    mkdirSync(cwd, { recursive: true });
    const [file, ...args] = argv;
    return new Promise((resolve) => {
      const child = spawn(file ?? "true", args, { cwd, stdio: ["ignore", "pipe", "pipe"], timeout: opts.timeoutMs ?? 60_000 });
      child.once("error", (err) => resolve({ stdout: "", stderr: err.message, exitCode: 127 }));
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.once("close", (code, signal) => resolve({ stdout, stderr, exitCode: code ?? (signal ? 124 : 1) }));
    });
  }
}

function ok(): ExecOutcome {
  return { stdout: "", stderr: "", exitCode: 0 };
}

function fail(step: string, error: string): ExecOutcome {
  return { stdout: "", stderr: `${JSON.stringify({ type: "boot.failed", step, error })}\n`, exitCode: 1 };
}

/**
 * Splits a command line as `shellJoin` (functions/providers/sandbox-boot.ts) builds it: bare
 * words and single-quoted words (with `'\\''` for a quote). How E2B's `commands.run`, which
 * takes a line, reaches `exec`.
 */
export function splitShellLine(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated quote in ${line}`);
      word += line.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (c === "\\" && line[i + 1] === "'") {
      word += "'";
      i += 1;
      inWord = true;
    } else if (c === " ") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}
