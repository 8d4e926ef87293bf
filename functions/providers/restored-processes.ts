/**
 * A sandbox that comes back with its memory (E2B resume of a paused sandbox, E2B create from a
 * snapshot template, which "starts with the exact filesystem and memory state"): OpenCode, Caddy
 * and the sidecar are still running, with the environment and the password they were started
 * with (issue 22 §1). The provider therefore does not boot; it checks what came back:
 *
 * - OpenCode answers `/session` with the password derived from this session's key: healthy.
 *   A 401 means the processes belong to another key (e.g. a snapshot taken of another sandbox):
 *   waiting cannot help, so the check ends at once.
 * - The sidecar answers `/health` through the preview tunnel (Caddy and the sidecar both up).
 *
 * Anything unhealthy is restarted by stopping the restored boot's process group (the boot's
 * processes all live in it, sandbox/boot/processes.ts) and running `boot start` again on the
 * restored filesystem. Healthy processes are never restarted.
 */
import { httpProbe, waitUntilReady, type ProbeResult } from "../../sandbox/boot/readiness";
import { agentEndpointForKey } from "../agent/agent-endpoint";
import { SANDBOX_PATHS, sidecarUrlOnPreview, type ReadinessDeps } from "./sandbox-boot";

/** How long a restored sandbox's processes get to answer before they count as down (sum of backoff sleeps). */
export const RESTORED_PROCESS_BUDGET_MS = 10_000;

export type RestoredHealth = { healthy: true } | { healthy: false; reason: string };

/** OpenCode with this key's password, then the sidecar through the preview proxy. */
export async function checkRestoredProcesses(
  urls: { tunnelUrl: string; previewUrl: string | null },
  deps: ReadinessDeps,
  sandboxKey: string | null,
  budgetMs = RESTORED_PROCESS_BUDGET_MS,
): Promise<RestoredHealth> {
  const { authorization } = agentEndpointForKey(urls.tunnelUrl, sandboxKey);
  const session = `${urls.tunnelUrl.replace(/\/+$/, "")}/session`;
  const openCode = async (): Promise<ProbeResult> => {
    const res = await deps.fetch(session, authorization ? { headers: { authorization } } : undefined);
    if (res.ok) return { ready: true };
    // Another key's OpenCode: its password will not change by waiting.
    if (res.status === 401) return { ready: false, reason: "OpenCode refused this session's password (HTTP 401)", fatal: true };
    return { ready: false, reason: `HTTP ${res.status ?? "non-2xx"} from OpenCode` };
  };
  try {
    await waitUntilReady(openCode, { sleep: deps.sleep, budgetMs, what: "restored OpenCode" });
  } catch (err) {
    return { healthy: false, reason: err instanceof Error ? err.message : String(err) };
  }
  const sidecar = sidecarUrlOnPreview(urls.previewUrl);
  if (sidecar) {
    try {
      await waitUntilReady(httpProbe(`${sidecar}/health`, deps.fetch), { sleep: deps.sleep, budgetMs, what: "restored sidecar" });
    } catch (err) {
      return { healthy: false, reason: err instanceof Error ? err.message : String(err) };
    }
  }
  return { healthy: true };
}

/**
 * Stops a restored boot and everything it started: SIGTERM to each `boot.mjs run` process group,
 * up to 10 s for it to go, then SIGKILL. Exits 0 when nothing is left (or nothing ran). The
 * pattern brackets one letter (`/opt/sandbox/[b]oot.mjs run`) so it never matches this script's
 * own shell, whose command line holds the pattern.
 */
export function stopBootScript(bootEntry: string): string {
  const pattern = `${bootEntry.replace(/\/([^/])([^/]*)$/, "/[$1]$2")} run`;
  return [
  `pids=$(pgrep -f '${pattern}' || true)`,
  `[ -z "$pids" ] && exit 0`,
  `for p in $pids; do kill -TERM "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done`,
  `i=0; while pgrep -f '${pattern}' >/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done`,
  `for p in $pids; do kill -KILL "-$p" 2>/dev/null || true; done`,
  `exit 0`,
  ].join("; ");
}

export function stopRestoredBootCommand(): string[] {
  return ["sh", "-c", stopBootScript(SANDBOX_PATHS.bootEntry)];
}
