/**
 * Host-side helpers of the local provider: a free loopback port for each sandbox process, and
 * running a command to completion. Process-group primitives (liveness, kill) are the sandbox's
 * own (sandbox/shared/process-group.ts), one implementation for both sides.
 */
import { execFile } from "node:child_process";
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

/**
 * Waits (up to `timeoutMs`) until no process of the group exists at all, zombies included. A
 * local sandbox's leader is this process's child: once `killGroup` (which ignores zombies) is
 * done, Node reaps it within moments, and terminate returns with the group id free. False when
 * something is still there at the deadline (a zombie nobody reaps holds nothing; callers go on).
 */
export async function groupReaped(pgid: number, timeoutMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ESRCH") return true;
    }
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
}
