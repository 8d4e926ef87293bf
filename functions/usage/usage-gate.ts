/**
 * The org's limits at the doors a session runs through (API.md "Usage, limits and credits"): one
 * implementation for create (credits), and for resume, wake and the `ensure-runtime` flow itself
 * (credits, then a running place). The refusals are typed errors (402 `credits_exhausted`, 429
 * `quota_exceeded`) that the HTTP and WebSocket edges, the Slack and automation workers map or catch.
 */
import { CreditsExhaustedError, QuotaExceededError } from "../domain/errors";
import type { SessionRecord } from "../domain/session";
import { utcMonth, type OrgLimits } from "../domain/usage";
import type { OrgUsageStore } from "../ports/org-usage";

/** 429 `quota_exceeded`: all of the org's `maxRunningSessions` places are taken. */
export class RunningSessionsLimitError extends QuotaExceededError {}

/** 402 when the org's `monthlyActiveSeconds` is spent. Returns the limits it read (or was given: `known`). */
export async function requireCredits(usage: OrgUsageStore, orgId: string, now: Date, known?: OrgLimits): Promise<OrgLimits> {
  const limits = known ?? (await usage.getLimits(orgId));
  const budget = limits.monthlyActiveSeconds;
  if (budget === null) return limits;
  const spent = budget === 0 ? 0 : await usage.spentInMonth(orgId, now);
  if (budget === 0 || spent >= budget) {
    throw new CreditsExhaustedError(
      `credits exhausted: the org has used ${Math.floor(spent)} of its ${budget} active seconds for ${utcMonth(now)} (monthlyActiveSeconds); raise it with PUT /v1/org/limits`,
      { context: { orgId, spent, budget } },
    );
  }
  return limits;
}

/**
 * Whether `session` may (start to) run now: credits left, and one of the org's
 * `maxRunningSessions` places taken for it (a conditional write: two racing resumes at
 * `max - 1` take one place between them). A session that runs already holds its place.
 * `known`: the org's limits when the caller read them already (the flow's Begin, with the org's model).
 */
export async function admitToRun(usage: OrgUsageStore, session: Pick<SessionRecord, "id" | "orgId">, now: Date, known?: OrgLimits): Promise<void> {
  const limits = await requireCredits(usage, session.orgId, now, known);
  const max = limits.maxRunningSessions;
  if (max === null) return;
  if (!(await usage.acquireRunningSlot(session.orgId, session.id, max, now))) {
    throw new RunningSessionsLimitError(
      `running sessions: the org has ${max} running sessions and maxRunningSessions is ${max}; pause or stop one, or raise the limit with PUT /v1/org/limits`,
      { context: { orgId: session.orgId, sessionId: session.id, limit: max } },
    );
  }
}

/** A refusal `admitToRun` or `requireCredits` raised (anything else is a fault to propagate). */
export function isUsageRefusal(err: unknown): err is CreditsExhaustedError | RunningSessionsLimitError {
  return err instanceof CreditsExhaustedError || err instanceof RunningSessionsLimitError;
}
