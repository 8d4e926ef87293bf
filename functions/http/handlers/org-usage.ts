/**
 * The org's usage and limits (API.md "Usage, limits and credits"):
 * - `GET /v1/org` -> `{org: {id, limits: {maxRunningSessions, monthlyActiveSeconds}, usage: {period, activeSeconds, runningSessions}}}`
 *   (`period`: the UTC month `YYYY-MM` the credits count; a limit of null is unlimited);
 * - `PUT /v1/org/limits` *admin* `{maxRunningSessions?, monthlyActiveSeconds?}` (non-negative
 *   integers or null; fields left out keep their value) -> 200 with the same `org` view;
 * - `GET /v1/usage?from=&to=` (UTC dates `YYYY-MM-DD`, inclusive; default: the current month up
 *   to today; at most 366 days) -> `{items: [{day, activeSeconds, sessions}], total}`, days
 *   without usage left out.
 */
import * as z from "zod";
import { ValidationError } from "../../domain/errors";
import { LimitValue, UtcDate, daysBetween, monthStart, secondsOf, utcDay, utcMonth } from "../../domain/usage";
import { httpRoute, type HttpDeps } from "../http-handler";
import { requireAdmin, requirePrincipal } from "../session-access";

/** The longest range one usage request may ask for. */
export const MAX_USAGE_DAYS = 366;

async function orgView(deps: HttpDeps, orgId: string) {
  const now = deps.now();
  const [limits, activeSeconds, runningSessions] = await Promise.all([deps.usage.getLimits(orgId), deps.usage.spentInMonth(orgId, now), deps.usage.countRunning(orgId)]);
  return { org: { id: orgId, limits, usage: { period: utcMonth(now), activeSeconds, runningSessions } } };
}

export const makeGetOrgHandler = httpRoute({ name: "GetOrg", auth: true }, async ({ principal }, deps) => {
  const who = requirePrincipal(principal);
  return { status: 200, body: await orgView(deps, who.orgId) };
});

export const OrgLimitsBody = z
  .object({
    maxRunningSessions: LimitValue.optional(),
    monthlyActiveSeconds: LimitValue.optional(),
  })
  .strict();

export const makePutOrgLimitsHandler = httpRoute({ name: "PutOrgLimits", auth: true, body: OrgLimitsBody }, async ({ principal, body }, deps) => {
  const who = requireAdmin(principal);
  await deps.usage.putLimits(who.orgId, body, deps.now());
  deps.logger.info("org limits set", { orgId: who.orgId, ...body });
  return { status: 200, body: await orgView(deps, who.orgId) };
});

export const UsageQuery = z.object({ from: UtcDate.optional(), to: UtcDate.optional() }).strict();

export const makeGetUsageHandler = httpRoute({ name: "GetUsage", auth: true, query: UsageQuery }, async ({ principal, query }, deps) => {
  const who = requirePrincipal(principal);
  const now = deps.now();
  const to = query.to ?? utcDay(now);
  const from = query.from ?? (query.to ? monthStart(new Date(`${query.to}T00:00:00.000Z`)) : monthStart(now));
  if (from > to) throw new ValidationError(`query.from: ${from} is after query.to (${to})`);
  if (daysBetween(from, to) > MAX_USAGE_DAYS) throw new ValidationError(`query.from: the range ${from}..${to} is longer than ${MAX_USAGE_DAYS} days`);
  const items = await deps.usage.usageByDay(who.orgId, from, to);
  const total = secondsOf(items.reduce((sum, d) => sum + Math.round(d.activeSeconds * 1000), 0));
  return { status: 200, body: { items, total } };
});
