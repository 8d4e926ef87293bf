/**
 * Usage metering and limits (API.md "Usage, limits and credits", seed 000 "Billing Integration"),
 * the pure part: how a running interval splits into UTC days, the calendar periods, and the
 * shape of an org's limits. The store (functions/store/dynamo-org-usage.ts) writes what this
 * computes.
 */
import * as z from "zod";

const DAY_MS = 86_400_000;

/** `YYYY-MM-DD` of the UTC day `at` falls in. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** `YYYY-MM` of the UTC month `at` falls in: the period `monthlyActiveSeconds` counts. */
export function utcMonth(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** One UTC day's share of a running interval: `[from, to]`, both ISO times inside that day. */
export interface DaySegment {
  day: string;
  from: string;
  to: string;
  ms: number;
}

/**
 * The running interval `[start, end]` cut at each UTC midnight it crosses (a session running at
 * midnight counts on both days). Empty when `end` is not after `start`.
 */
export function splitByUtcDay(start: Date, end: Date): DaySegment[] {
  const out: DaySegment[] = [];
  let from = start.getTime();
  const until = end.getTime();
  while (from < until) {
    const midnight = (Math.floor(from / DAY_MS) + 1) * DAY_MS;
    const to = Math.min(midnight, until);
    out.push({ day: utcDay(new Date(from)), from: new Date(from).toISOString(), to: new Date(to).toISOString(), ms: to - from });
    from = to;
  }
  return out;
}

/** Seconds from milliseconds, to the millisecond (the precision of the session's `activeSeconds`). */
export function secondsOf(ms: number): number {
  return Math.round(ms) / 1000;
}

/** A limit of null is unlimited (the default). */
export const LimitValue = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).nullable();

export const OrgLimits = z.object({
  maxRunningSessions: LimitValue,
  monthlyActiveSeconds: LimitValue,
});
export type OrgLimits = z.infer<typeof OrgLimits>;

export const UNLIMITED: OrgLimits = { maxRunningSessions: null, monthlyActiveSeconds: null };

/** One UTC day of an org's metered usage (`GET /v1/usage`). */
export interface UsageDay {
  day: string;
  activeSeconds: number;
  /** Distinct sessions that ran that day. */
  sessions: number;
}

/** `YYYY-MM-DD` that is a real calendar day. */
export const UtcDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a UTC date YYYY-MM-DD")
  .refine((v) => !Number.isNaN(Date.parse(`${v}T00:00:00.000Z`)) && new Date(`${v}T00:00:00.000Z`).toISOString().slice(0, 10) === v, "must be a real calendar date");

/** The first day of the month `at` falls in. */
export function monthStart(at: Date): string {
  return `${utcMonth(at)}-01`;
}

/** Days from `from` to `to` inclusive (both `YYYY-MM-DD`). */
export function daysBetween(from: string, to: string): number {
  return Math.round((Date.parse(`${to}T00:00:00.000Z`) - Date.parse(`${from}T00:00:00.000Z`)) / DAY_MS) + 1;
}
