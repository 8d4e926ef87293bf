/**
 * Automation schedules (functions/automations/schedule-expression.ts): EventBridge Scheduler's
 * syntax, evaluated by croner in the automation's timezone (DST included), the minimum interval,
 * and the run rules (automation.ts).
 */
import { describe, expect, it } from "vitest";
import { afterRunEnd, firingRunId, isRunActive, summaryOf } from "../../functions/automations/automation";
import { ScheduleError, nextRunAt, parseSchedule, validateSchedule } from "../../functions/automations/schedule-expression";

const now = new Date("2026-03-07T12:00:00.000Z");

function fieldOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof ScheduleError ? err.field : `other: ${String(err)}`;
  }
}

describe("automation schedules", () => {
  it("rates count from the anchor", () => {
    const s = parseSchedule("rate(15 minutes)", "UTC");
    expect(nextRunAt(s, "UTC", new Date("2026-03-07T11:50:00.000Z"), now)?.toISOString()).toBe("2026-03-07T12:05:00.000Z");
    expect(nextRunAt(parseSchedule("rate(1 day)", "UTC"), "UTC", now, now)?.toISOString()).toBe("2026-03-08T12:00:00.000Z");
  });

  it("cron in the automation's timezone, Quartz weekdays (1 = Sunday), across DST", () => {
    // 09:00 on weekdays in Berlin: UTC+1 before 29 March 2026, UTC+2 after.
    const weekdays = parseSchedule("cron(0 9 ? * 2-6 *)", "Europe/Berlin");
    expect(nextRunAt(weekdays, "Europe/Berlin", now, now)?.toISOString()).toBe("2026-03-09T08:00:00.000Z");
    expect(nextRunAt(weekdays, "Europe/Berlin", now, new Date("2026-03-28T00:00:00Z"))?.toISOString()).toBe("2026-03-30T07:00:00.000Z");
    // 02:30 does not exist on 8 March 2026 in New York: the next wall-clock time that does.
    const gap = parseSchedule("cron(30 2 8 3 ? 2026)", "America/New_York");
    expect(nextRunAt(gap, "America/New_York", now, now)?.toISOString()).toBe("2026-03-08T07:00:00.000Z");
    expect(nextRunAt(parseSchedule("cron(0 0 1 1 ? 2025)", "UTC"), "UTC", now, now)).toBeNull();
  });

  it("refuses what EventBridge Scheduler refuses, naming the field", () => {
    expect(fieldOf(() => parseSchedule("rate(5 minutes)", "Mars/Base"))).toBe("timezone");
    expect(fieldOf(() => parseSchedule("rate(1 minutes)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("rate(5 minute)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("rate(0 minutes)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("cron(0 9 * * MON *)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("cron(0 9 ? * ? *)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("cron(0 9 ? * MON)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("cron(99 9 ? * MON *)", "UTC"))).toBe("schedule");
    expect(fieldOf(() => parseSchedule("@daily", "UTC"))).toBe("schedule");
  });

  it("the minimum interval: rates, crons, and seconds only under a one-minute minimum", () => {
    expect(fieldOf(() => validateSchedule("rate(4 minutes)", "UTC", 300, now))).toBe("schedule");
    expect(fieldOf(() => validateSchedule("cron(* * * * ? *)", "UTC", 300, now))).toBe("schedule");
    expect(fieldOf(() => validateSchedule("cron(0/5 * * * ? *)", "UTC", 300, now))).toBeNull();
    expect(fieldOf(() => validateSchedule("rate(10 seconds)", "UTC", 300, now))).toBe("schedule");
    expect(fieldOf(() => validateSchedule("rate(10 seconds)", "UTC", 1, now))).toBeNull();
    expect(fieldOf(() => validateSchedule("cron(0 0 1 1 ? 2020)", "UTC", 300, now))).toBe("schedule");
  });

  it("run rules: deterministic firing ids, the skip rule, the failure streak, the summary", () => {
    expect(firingRunId("aut_1", "schedule", "2026-03-07T12:00:00.000Z")).toBe(firingRunId("aut_1", "schedule", "2026-03-07T12:00:00.000Z"));
    expect(firingRunId("aut_1", "schedule", "2026-03-07T12:00:00.000Z")).not.toBe(firingRunId("aut_1", "schedule", "2026-03-07T12:05:00.000Z"));
    expect(["starting", "running", "succeeded", "skipped"].map((s) => isRunActive(s as never))).toEqual([true, true, false, false]);
    expect(afterRunEnd(0, "failed")).toEqual({ consecutiveFailures: 1, disable: false });
    expect(afterRunEnd(2, "timed_out")).toEqual({ consecutiveFailures: 3, disable: true });
    expect(afterRunEnd(2, "succeeded")).toEqual({ consecutiveFailures: 0, disable: false });
    expect(summaryOf("  echo: hi \n")).toBe("echo: hi");
    expect(summaryOf("x".repeat(400))).toHaveLength(281);
  });
});
