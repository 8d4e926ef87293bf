/**
 * Automation schedules (API.md "Automations"): EventBridge Scheduler's own syntax,
 * `rate(<n> minute|minutes|hour|hours|day|days)` or `cron(<min> <hour> <day-of-month> <month>
 * <day-of-week> <year>)`, in an IANA timezone. Cron is evaluated by croner (a kept library, never
 * hand-parsed: ARCHITECTURE.md §9) in EventBridge's dialect: Sunday is 1 (Quartz numbering), one of
 * day-of-month / day-of-week must be `?`, the year is a field. DST is croner's: a wall-clock time
 * that does not exist that day fires at the next one that does (as EventBridge Scheduler does).
 * `rate(<n> seconds)` is the local runtime's test schedule: accepted only when the minimum interval
 * (AUTOMATION_MIN_INTERVAL_SECONDS) is under a minute, and never deployable to EventBridge.
 * Pure: every function takes `now`.
 */
import { Cron } from "croner";

export type ParsedSchedule =
  | { kind: "rate"; intervalMs: number; expression: string }
  | { kind: "cron"; fields: string[]; expression: string };

export class ScheduleError extends Error {
  override readonly name = "ScheduleError";
  constructor(
    readonly field: "schedule" | "timezone",
    message: string,
  ) {
    super(message);
  }
}

const UNIT_MS: Record<string, number> = { second: 1000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };
const RATE = /^rate\((\d{1,6}) (second|seconds|minute|minutes|hour|hours|day|days)\)$/;
const CRON = /^cron\((.+)\)$/;

/** Is `tz` an IANA timezone name this runtime knows (Intl's own table)? */
export function isTimezone(tz: string): boolean {
  if (!/^[A-Za-z_]+(\/[A-Za-z0-9_+-]+){0,2}$/.test(tz) && tz !== "UTC") return false;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

function cronJob(fields: string[], timezone: string): Cron {
  // croner's 7-part form: seconds first (always 0), Quartz weekday numbering (Sunday = 1), and
  // EventBridge's `<start>/<step>` (`0/5`: every 5 from 0), which croner calls sloppy ranges.
  return new Cron(`0 ${fields.join(" ")}`, { timezone, paused: true, mode: "7-part", alternativeWeekdays: true, sloppyRanges: true });
}

/** Parses and checks an expression's syntax (not its interval): `ScheduleError` naming the field. */
export function parseSchedule(expression: string, timezone: string): ParsedSchedule {
  if (!isTimezone(timezone)) throw new ScheduleError("timezone", `"${timezone}" is not an IANA timezone name (e.g. "Europe/Berlin", "UTC")`);
  const rate = RATE.exec(expression);
  if (rate) {
    const n = Number(rate[1]);
    const unit = rate[2] ?? "";
    if (n < 1) throw new ScheduleError("schedule", "a rate must be at least 1");
    // EventBridge's own rule: 1 takes the singular unit, anything else the plural.
    if ((n === 1) !== !unit.endsWith("s")) throw new ScheduleError("schedule", `write rate(1 ${unit.replace(/s$/, "")}) or rate(<n> ${unit.replace(/s?$/, "s")}) (EventBridge Scheduler's syntax)`);
    return { kind: "rate", intervalMs: n * (UNIT_MS[unit.replace(/s$/, "")] ?? 0), expression };
  }
  const cron = CRON.exec(expression);
  if (cron) {
    const fields = (cron[1] ?? "").trim().split(/\s+/);
    if (fields.length !== 6) throw new ScheduleError("schedule", `cron() takes 6 fields (minutes hours day-of-month month day-of-week year), got ${fields.length}`);
    const [, , dom, , dow] = fields;
    if ((dom === "?") === (dow === "?")) throw new ScheduleError("schedule", "cron(): exactly one of day-of-month and day-of-week must be ?");
    try {
      cronJob(fields, timezone);
    } catch (err) {
      throw new ScheduleError("schedule", `cron(): ${(err as Error).message}`);
    }
    return { kind: "cron", fields, expression };
  }
  throw new ScheduleError("schedule", "must be rate(<n> minutes|hours|days) or cron(<min> <hour> <day-of-month> <month> <day-of-week> <year>)");
}

/**
 * The next firing strictly after `after`. A rate counts from its `anchor` (when the schedule was
 * created or last changed: EventBridge starts a rate schedule then); a cron from the wall clock
 * in `timezone`. Null when a cron has no future firing (a past year).
 */
export function nextRunAt(schedule: ParsedSchedule, timezone: string, anchor: Date, after: Date): Date | null {
  if (schedule.kind === "rate") {
    const elapsed = after.getTime() - anchor.getTime();
    const k = elapsed < 0 ? 1 : Math.floor(elapsed / schedule.intervalMs) + 1;
    return new Date(anchor.getTime() + k * schedule.intervalMs);
  }
  return cronJob(schedule.fields, timezone).nextRun(after);
}

/**
 * The shortest gap between firings (ms): a rate's interval, or the least gap among a cron's next
 * 50 firings (enough to see every-minute, hourly and daily patterns).
 */
export function shortestIntervalMs(schedule: ParsedSchedule, timezone: string, now: Date): number {
  if (schedule.kind === "rate") return schedule.intervalMs;
  const runs = cronJob(schedule.fields, timezone).nextRuns(50, now);
  let least = Number.POSITIVE_INFINITY;
  for (let i = 1; i < runs.length; i++) least = Math.min(least, (runs[i]?.getTime() ?? 0) - (runs[i - 1]?.getTime() ?? 0));
  return least;
}

/** Parse plus the minimum interval (API.md: under AUTOMATION_MIN_INTERVAL_SECONDS is a 400 naming the field). */
export function validateSchedule(expression: string, timezone: string, minIntervalSeconds: number, now: Date): ParsedSchedule {
  const parsed = parseSchedule(expression, timezone);
  if (parsed.kind === "rate" && /second/.test(expression) && minIntervalSeconds >= 60) {
    throw new ScheduleError("schedule", "rate(<n> seconds) is accepted only by a local runtime whose AUTOMATION_MIN_INTERVAL_SECONDS is under 60");
  }
  const least = shortestIntervalMs(parsed, timezone, now);
  if (least < minIntervalSeconds * 1000) {
    throw new ScheduleError("schedule", `fires every ${Math.round(least / 1000)} s; the minimum interval is ${minIntervalSeconds} s`);
  }
  if (parsed.kind === "cron" && nextRunAt(parsed, timezone, now, now) === null) throw new ScheduleError("schedule", "cron(): never fires again");
  return parsed;
}
