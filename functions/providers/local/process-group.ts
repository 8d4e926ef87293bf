/**
 * Process-group primitives for local sandboxes. A sandbox is one process group whose leader is
 * OpenCode (the launcher `exec`s it), so "leader alive" is the liveness test and "no process of
 * the group left" is the termination test.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** A free TCP port on loopback, allocated by the OS (never a hard-coded one). */
export function allocatePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no port allocated"))));
    });
  });
}

/**
 * Linux start time of a process (clock ticks since boot, /proc/<pid>/stat field 22), recorded so
 * a recycled pid is not mistaken for the sandbox. Null where /proc is unavailable.
 */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces; fields after the closing paren are fixed.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z") return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function signalOk(target: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(target, signal);
    return true;
  } catch (err) {
    // EPERM means it exists but is not ours: for liveness that still counts as present.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The group leader is running and is the same process we started (not a recycled pid). */
export function leaderAlive(pgid: number, startTime: string | null): boolean {
  if (!signalOk(pgid, 0)) return false;
  const now = processStartTime(pgid);
  if (startTime === null) return now !== null || !existsProc();
  return now === startTime;
}

function existsProc(): boolean {
  try {
    readFileSync("/proc/self/stat");
    return true;
  } catch {
    return false;
  }
}

/** A process with this pid exists (zombies included). */
export function pidPresent(pid: number): boolean {
  return signalOk(pid, 0);
}

/** Some process of the group is still present (zombies included, they still hold the pgid). */
export function groupPresent(pgid: number): boolean {
  return signalOk(-pgid, 0);
}

async function waitFor(predicate: () => boolean, timeoutMs: number, intervalMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (predicate()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * SIGTERM the whole group, SIGKILL after `graceMs`, then wait until no process of it is left.
 * Returns false only if processes survive SIGKILL past `killWaitMs` (stuck in the kernel).
 */
export async function killGroup(pgid: number, graceMs = 5_000, killWaitMs = 5_000): Promise<boolean> {
  if (!groupPresent(pgid)) return true;
  signalOk(-pgid, "SIGTERM");
  if (await waitFor(() => !groupPresent(pgid), graceMs)) return true;
  signalOk(-pgid, "SIGKILL");
  return waitFor(() => !groupPresent(pgid), killWaitMs);
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Runs a command to completion; a non-zero exit is a result, not an exception. */
export function run(
  file: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { cwd: opts.cwd, env: opts.env, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024, killSignal: "SIGKILL" },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== "number") {
          // Spawn failure (ENOENT...) or timeout: no exit code to report.
          if (err.killed || err.signal) resolve({ stdout, stderr: `${stderr}\nkilled by ${err.signal ?? "timeout"}`, exitCode: 124 });
          else reject(err);
          return;
        }
        resolve({ stdout, stderr, exitCode: err ? Number(err.code) : 0 });
      },
    );
  });
}
