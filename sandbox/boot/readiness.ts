/**
 * Waiting for a service to answer (seed 003 §5 "Reliability": OpenCode readiness polls with
 * exponential backoff, 200 ms × 1.5 capped at 2 s, within a 30 s budget). One implementation,
 * used inside the sandbox (boot phase 1, sidecar health) and by the cloud providers through
 * their tunnels. The budget is the sum of the sleeps, not a clock read, so tests with an
 * instant `sleep` are deterministic; each probe bounds its own duration.
 */

export const READINESS_BACKOFF = { initialMs: 200, factor: 1.5, maxMs: 2_000 } as const;

export type ProbeResult = { ready: true } | { ready: false; reason: string; fatal?: boolean };

export interface WaitOptions {
  sleep: (ms: number) => Promise<void>;
  budgetMs: number;
  /** What is waited for, in error messages ("OpenCode"). */
  what: string;
}

export function nextDelay(delayMs: number): number {
  return Math.min(Math.round(delayMs * READINESS_BACKOFF.factor), READINESS_BACKOFF.maxMs);
}

/** The sleeps a wait that never succeeds takes: 200, 300, 450, 675, 1013, 1520, 2000, 2000, ... */
export function backoffSchedule(budgetMs: number): number[] {
  const delays: number[] = [];
  let waited = 0;
  let delay: number = READINESS_BACKOFF.initialMs;
  while (waited < budgetMs) {
    delays.push(delay);
    waited += delay;
    delay = nextDelay(delay);
  }
  return delays;
}

/** Named like the SDKs' timeout errors, so providers classify a readiness timeout as transient. */
export class ReadinessTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TimeoutError";
  }
}

/** The probed process is gone: waiting longer cannot help. */
export class ReadinessAbortedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReadinessAbortedError";
  }
}

/**
 * Probes until ready. A probe answering `fatal` (e.g. the process exited) fails at once; a
 * probe that throws counts as "not ready yet" with the error as the reason.
 */
export async function waitUntilReady(probe: () => Promise<ProbeResult>, options: WaitOptions): Promise<{ attempts: number; waitedMs: number }> {
  let waited = 0;
  let delay: number = READINESS_BACKOFF.initialMs;
  let attempts = 0;
  let lastReason = "not ready";
  for (;;) {
    attempts += 1;
    let result: ProbeResult;
    try {
      result = await probe();
    } catch (err) {
      result = { ready: false, reason: err instanceof Error ? err.message : String(err) };
    }
    if (result.ready) return { attempts, waitedMs: waited };
    lastReason = result.reason;
    if (result.fatal) throw new ReadinessAbortedError(`${options.what} ${result.reason}`);
    if (waited >= options.budgetMs) break;
    await options.sleep(delay);
    waited += delay;
    delay = nextDelay(delay);
  }
  throw new ReadinessTimeoutError(`${options.what} did not become ready within ${options.budgetMs}ms (${lastReason})`);
}

/** Request headers a probe sends (e.g. OpenCode's `authorization`); never part of a reason. */
export type ProbeHeaders = Record<string, string>;

/** A probe that GETs `url` (with `headers`, when given) and is ready on any 2xx. */
export function httpProbe(
  url: string,
  fetchFn: (url: string, init?: { headers: ProbeHeaders }) => Promise<{ ok: boolean; status?: number }>,
  headers?: ProbeHeaders,
): () => Promise<ProbeResult> {
  return async () => {
    const res = await (headers ? fetchFn(url, { headers }) : fetchFn(url));
    return res.ok ? { ready: true } : { ready: false, reason: `HTTP ${res.status ?? "non-2xx"} from ${url}` };
  };
}
