/**
 * The metering pass (API.md "Usage, limits and credits", seed 000 "Runtime running: metering
 * worker bills every 30 s"), run every METERING_INTERVAL_SECONDS (an EventBridge Scheduler rate
 * schedule in AWS, functions/usage/metering-fired.ts; a timer locally):
 *
 * 1. every running session's interval is metered up to now (one conditional write each, two
 *    across a UTC midnight; functions/store/dynamo-org-usage.ts: idempotent, so a duplicated
 *    delivery or two passes at once never count a second twice);
 * 2. every org with running sessions and a `monthlyActiveSeconds` limit that is now spent has
 *    each of its running sessions paused through the ordinary `pause` flow with reason
 *    `credit_limit` (snapshot kept; the seed terminates them, we keep the work). The flow's
 *    execution name is fixed by the session's generation, so a second pass starts nothing new.
 *
 * It never starts a sandbox, so racing an idle snapshot it can only pause what the idle snapshot
 * leaves running (the pause flow then skips: `session is paused`).
 */
import type { SessionRecord, SessionStatus } from "../domain/session";
import { NON_TERMINAL_STATUSES } from "../domain/session-transitions";
import { secondsOf } from "../domain/usage";
import type { FlowDeps } from "../flows/flow-deps";
import { errorForLog } from "../observability/logger";
import { METRIC_NAMES } from "../ports/metrics-sink";
import { requireCredits } from "./usage-gate";
import { CreditsExhaustedError } from "../domain/errors";
import { allRunningSessions } from "../services/running-sessions";

export interface MeteringReport {
  metered: number;
  /** Seconds this pass added, by org. */
  activeSeconds: Record<string, number>;
  /** Sessions whose pause this pass started (`credit_limit`). */
  paused: string[];
  /** Sessions in each non-terminal status when the pass began (the SessionsByStatus gauge). */
  sessionsByStatus: Partial<Record<SessionStatus, number>>;
  errors: number;
}

export type MeteringDeps = Pick<FlowDeps, "sessions" | "usage" | "flows" | "metrics" | "now" | "logger">;

/** How far back the pass rewrites an interval's days: a day that ended before this was closed by an earlier pass. */
const LOOKBACK_MS = 3_600_000;

const runningSessions = (deps: MeteringDeps): Promise<SessionRecord[]> => allRunningSessions(deps.sessions);

export async function meterRunningSessions(deps: MeteringDeps): Promise<MeteringReport> {
  const report: MeteringReport = { metered: 0, activeSeconds: {}, paused: [], sessionsByStatus: {}, errors: 0 };
  const now = deps.now();
  const byOrg = new Map<string, SessionRecord[]>();
  const listed = await runningSessions(deps);
  // The running-sessions gauge by provider (issue 19), from the list this pass reads anyway.
  const byProvider = new Map<string, number>();
  for (const session of listed) if (session.status === "running") byProvider.set(session.provider, (byProvider.get(session.provider) ?? 0) + 1);
  for (const [provider, count] of byProvider) deps.metrics.put(METRIC_NAMES.runningSessions, count, "Count", { Provider: provider });
  // Sessions by status (a gauge of every non-terminal status, zeros included so a line falls back to 0).
  for (const status of NON_TERMINAL_STATUSES) {
    try {
      const count = status === "running" ? listed.length : await deps.sessions.countSessionsByStatus(status);
      report.sessionsByStatus[status] = count;
      deps.metrics.put(METRIC_NAMES.sessionsByStatus, count, "Count", { Status: status });
    } catch (err) {
      report.errors++;
      deps.logger.error("counting sessions by status failed", { status, error: errorForLog(err) });
    }
  }
  for (const session of listed) {
    if (session.status !== "running" || !session.runningSince) continue;
    byOrg.set(session.orgId, [...(byOrg.get(session.orgId) ?? []), session]);
    try {
      const added = await deps.usage.meterInterval({
        orgId: session.orgId,
        sessionId: session.id,
        provider: session.provider,
        intervalStart: session.runningSince,
        until: now,
        since: new Date(now.getTime() - LOOKBACK_MS),
      });
      report.metered++;
      report.activeSeconds[session.orgId] = secondsOf(Math.round(((report.activeSeconds[session.orgId] ?? 0) + added) * 1000));
    } catch (err) {
      report.errors++;
      deps.logger.error("metering a session failed", { sessionId: session.id, error: errorForLog(err) });
    }
  }
  for (const [orgId, sessions] of byOrg) {
    try {
      await requireCredits(deps.usage, orgId, now);
    } catch (err) {
      if (!(err instanceof CreditsExhaustedError)) {
        report.errors++;
        deps.logger.error("reading an org's credits failed", { orgId, error: errorForLog(err) });
        continue;
      }
      for (const session of sessions) {
        try {
          const lease = await deps.sessions.readLease(session.id);
          const started = await deps.flows.start({ flow: "pause", sessionId: session.id, generation: lease?.fence ?? 0, actor: "metering", reason: "credit_limit" });
          if (started.started) {
            report.paused.push(session.id);
            deps.metrics.put(METRIC_NAMES.creditPauses, 1, "Count");
          }
        } catch (pauseErr) {
          report.errors++;
          deps.logger.error("credit limit pause failed to start", { sessionId: session.id, error: errorForLog(pauseErr) });
        }
      }
      deps.logger.info("credits exhausted: pausing the org's running sessions", { orgId, sessions: sessions.length });
    }
  }
  return report;
}
