/**
 * The processes a boot starts and waits on. Long-running ones (OpenCode, Caddy, the sidecar)
 * stay in the boot's process group, so whoever ends the group ends the sandbox; the table stops
 * them in reverse start order when the boot itself is told to stop.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdir, open } from "node:fs/promises";
import { dirname } from "node:path";
import type { ProcessId } from "./boot-plan";

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Runs a command to completion; a non-zero exit is a result, a spawn failure an exception. */
export function runToCompletion(
  file: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { cwd: opts.cwd, env: opts.env, timeout: opts.timeoutMs, maxBuffer: 16 * 1024 * 1024, killSignal: "SIGKILL" },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== "number") {
          if (err.killed || err.signal) resolve({ stdout, stderr: `${stderr}\nkilled by ${err.signal ?? "timeout"}`, exitCode: 124 });
          else reject(err);
          return;
        }
        resolve({ stdout, stderr, exitCode: err ? Number(err.code) : 0 });
      },
    );
  });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Entry {
  child: ChildProcess;
  exited: Promise<Exit>;
  exit: Exit | null;
}

export class ProcessTable {
  private readonly entries = new Map<ProcessId, Entry>();
  private readonly closers: (() => Promise<void>)[] = [];

  /**
   * Starts `argv` with output appended to `log`; resolves once the OS started it. `stdin`, when
   * given, is written to the process's stdin, which then closes (how the sidecar gets its key).
   */
  async start(id: ProcessId, argv: readonly string[], opts: { cwd: string; env: NodeJS.ProcessEnv; log: string; stdin?: string }): Promise<number> {
    const [file, ...args] = argv;
    if (!file) throw new Error(`${id}: empty command`);
    await mkdir(dirname(opts.log), { recursive: true });
    const log = await open(opts.log, "a");
    let entry: Entry;
    let started: Promise<void>;
    try {
      const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, stdio: [opts.stdin === undefined ? "ignore" : "pipe", log.fd, log.fd] });
      // A child that exits before reading makes the write fail with EPIPE: its exit is the news.
      child.stdin?.on("error", () => undefined);
      if (opts.stdin !== undefined) child.stdin?.end(opts.stdin);
      // Every listener is attached before the next await: "spawn", "error" and a fast "exit"
      // fire on later ticks and must not be missed.
      started = new Promise<void>((resolve, reject) => {
        child.once("spawn", () => resolve());
        child.once("error", (err) => reject(new Error(`${id} could not start: ${err.message}`)));
      });
      const exited = new Promise<Exit>((resolve) => {
        child.once("exit", (code, signal) => {
          entry.exit = { code, signal };
          resolve(entry.exit);
        });
      });
      entry = { child, exit: null, exited };
    } finally {
      await log.close();
    }
    await started;
    this.entries.set(id, entry);
    return entry.child.pid ?? 0;
  }

  /** Registers an in-process component (the development model) to close on stop. */
  onStop(close: () => Promise<void>): void {
    this.closers.push(close);
  }

  has(id: ProcessId): boolean {
    return this.entries.has(id);
  }

  /** The exit of a started process, or null while it runs. */
  exitOf(id: ProcessId): Exit | null {
    return this.entries.get(id)?.exit ?? null;
  }

  /** The pid of a started process while it runs; null otherwise. */
  pidOf(id: ProcessId): number | null {
    const entry = this.entries.get(id);
    return entry && entry.exit === null ? (entry.child.pid ?? null) : null;
  }

  /** SIGKILLs one process (a restart whose readiness failed) and waits for its exit. */
  async stop(id: ProcessId): Promise<void> {
    const entry = this.entries.get(id);
    if (!entry || entry.exit !== null) return;
    entry.child.kill("SIGKILL");
    await entry.exited;
  }

  waitExit(id: ProcessId): Promise<Exit> {
    const entry = this.entries.get(id);
    if (!entry) return Promise.resolve({ code: null, signal: null });
    return entry.exited;
  }

  /** SIGTERM everything still running (newest first), SIGKILL after `graceMs`. */
  async stopAll(graceMs = 5_000): Promise<void> {
    const running = [...this.entries.values()].reverse().filter((e) => e.exit === null);
    for (const e of running) e.child.kill("SIGTERM");
    const all = Promise.all(running.map((e) => e.exited));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      all.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), graceMs);
      }),
    ]);
    if (timer) clearTimeout(timer);
    if (timedOut) {
      for (const e of running) if (e.exit === null) e.child.kill("SIGKILL");
      await all;
    }
    for (const close of this.closers.splice(0).reverse()) await close().catch(() => undefined);
  }
}
