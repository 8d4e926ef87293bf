/**
 * Process-group primitives for sandbox services: each service is one process group whose leader
 * is the `sh -c` the sidecar spawned, so stop is "signal the group" and a pid saved in the state
 * file is only trusted when its /proc start time still matches (a recycled pid is not ours).
 * The local provider (functions/providers/local) uses these too: one implementation, here,
 * because sandbox/ runs inside the sandbox image and must not depend on functions/.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Linux start time of a process (/proc/<pid>/stat field 22), or null when gone or a zombie. */
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
    // EPERM: it exists but belongs to someone else; for presence that still counts.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The leader runs and is the process we started (same start time), not a recycled pid. Without
 * a recorded start time nothing can be proven, so the answer is no: better to leave a process
 * alone than to signal a stranger's.
 */
export function leaderAlive(pid: number, startTime: string | null): boolean {
  const now = processStartTime(pid);
  return now !== null && startTime !== null && now === startTime;
}

/**
 * Some live process of the group remains. Zombies do not count: an orphaned child is reaped by
 * PID 1, which in a sandbox may take seconds (or never happen), and a zombie holds nothing.
 * Without /proc, any member (zombies included) counts.
 */
export function groupPresent(pgid: number): boolean {
  if (!signalOk(-pgid, 0)) return false;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // After the command name: state, ppid, pgrp, ...
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z") return true;
    } catch {
      // exited while we looked
    }
  }
  return false;
}

/**
 * Whether signalling `-pgid` can only reach our service. True when the leader is ours, or when
 * the leader is gone but members remain: Linux never hands out a pid that is still some group's
 * id, so those members are the service's orphans, not a stranger's group.
 */
export function groupIsOurs(pgid: number, startTime: string | null): boolean {
  if (processStartTime(pgid) !== null) return leaderAlive(pgid, startTime);
  return groupPresent(pgid);
}

async function waitFor(predicate: () => boolean, timeoutMs: number, intervalMs = 25): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (predicate()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * SIGTERM the whole group, SIGKILL after `graceMs`, then wait until no process of it is left.
 * Returns false only if something survives SIGKILL past `killWaitMs`.
 */
export async function killGroup(pgid: number, graceMs = 5_000, killWaitMs = 5_000): Promise<boolean> {
  if (!groupPresent(pgid)) return true;
  signalOk(-pgid, "SIGTERM");
  if (await waitFor(() => !groupPresent(pgid), graceMs)) return true;
  signalOk(-pgid, "SIGKILL");
  return waitFor(() => !groupPresent(pgid), killWaitMs);
}
