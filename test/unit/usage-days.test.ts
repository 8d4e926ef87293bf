/** The pure part of usage metering (functions/domain/usage.ts): UTC day splits and the date fields of `GET /v1/usage`. */
import { describe, expect, it } from "vitest";
import { UtcDate, daysBetween, monthStart, splitByUtcDay, utcMonth } from "../../functions/domain/usage";

describe("splitByUtcDay", () => {
  it("keeps an interval inside one day whole", () => {
    expect(splitByUtcDay(new Date("2026-11-25T10:00:00.000Z"), new Date("2026-11-25T10:00:01.500Z"))).toEqual([
      { day: "2026-11-25", from: "2026-11-25T10:00:00.000Z", to: "2026-11-25T10:00:01.500Z", ms: 1500 },
    ]);
  });

  it("cuts at every UTC midnight it crosses; the parts add up to the interval to the millisecond", () => {
    const start = new Date("2026-11-30T23:59:59.250Z");
    const end = new Date("2026-12-02T00:00:00.001Z");
    const parts = splitByUtcDay(start, end);
    expect(parts.map((p) => p.day)).toEqual(["2026-11-30", "2026-12-01", "2026-12-02"]);
    expect(parts.map((p) => p.ms)).toEqual([750, 86_400_000, 1]);
    expect(parts.reduce((sum, p) => sum + p.ms, 0)).toBe(end.getTime() - start.getTime());
    expect(parts[1]).toMatchObject({ from: "2026-12-01T00:00:00.000Z", to: "2026-12-02T00:00:00.000Z" });
  });

  it("is empty when the end is not after the start", () => {
    const at = new Date("2026-11-25T10:00:00.000Z");
    expect(splitByUtcDay(at, at)).toEqual([]);
    expect(splitByUtcDay(at, new Date(at.getTime() - 1))).toEqual([]);
  });
});

describe("usage dates", () => {
  it("accepts real calendar days only", () => {
    expect(UtcDate.safeParse("2026-02-28").success).toBe(true);
    expect(UtcDate.safeParse("2028-02-29").success).toBe(true);
    for (const bad of ["2026-02-29", "2026-13-01", "2026-1-01", "yesterday", "2026-11-25T00:00:00Z", ""]) expect(UtcDate.safeParse(bad).success, bad).toBe(false);
  });

  it("months and ranges", () => {
    expect(utcMonth(new Date("2026-11-30T23:59:59.999Z"))).toBe("2026-11");
    expect(monthStart(new Date("2026-12-01T00:00:00.000Z"))).toBe("2026-12-01");
    expect(daysBetween("2026-11-01", "2026-11-30")).toBe(30);
    expect(daysBetween("2026-11-25", "2026-11-25")).toBe(1);
  });
});
