/**
 * Host-side helpers of the local provider: a free loopback port for each sandbox process, and
 * running a command to completion. Process-group primitives (liveness, kill) are the sandbox's
 * own (sandbox/shared/process-group.ts), one implementation for both sides.
 */
import { createServer } from "node:net";
import { runToCompletion, type RunResult } from "../../../sandbox/boot/processes";

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

export type { RunResult };

/**
 * Runs a command to completion (default bound 60 s); a non-zero exit is a result, a spawn
 * failure an exception. The boot's own `runToCompletion`: one implementation for both sides.
 */
export function run(file: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<RunResult> {
  return runToCompletion(file, args, { ...opts, timeoutMs: opts.timeoutMs ?? 60_000 });
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
