/** `token:create`'s expiry flags (issue 14 item 5): durations, ISO times, and errors naming the flag. */
import { describe, expect, it } from "vitest";
import { parseTokenExpiry } from "../../functions/api-tokens/token-expiry";

const NOW = new Date("2026-01-01T00:00:00.000Z");

describe("parseTokenExpiry", () => {
  it("no flag: the token never expires", () => {
    expect(parseTokenExpiry({}, NOW)).toBeUndefined();
  });

  it.each([
    ["30m", "2026-01-01T00:30:00.000Z"],
    ["12h", "2026-01-01T12:00:00.000Z"],
    ["90d", "2026-04-01T00:00:00.000Z"],
    ["7", "2026-01-08T00:00:00.000Z"],
  ])("--expires-in %s", (flag, expected) => {
    expect(parseTokenExpiry({ expiresIn: flag }, NOW)?.toISOString()).toBe(expected);
  });

  it("--expires-at takes an ISO date or time in the future", () => {
    expect(parseTokenExpiry({ expiresAt: "2026-02-01T12:00:00Z" }, NOW)?.toISOString()).toBe("2026-02-01T12:00:00.000Z");
    expect(parseTokenExpiry({ expiresAt: "2026-03-01" }, NOW)?.toISOString()).toBe("2026-03-01T00:00:00.000Z");
  });

  it.each([
    [{ expiresIn: "soon" }, "--expires-in must be"],
    [{ expiresIn: "0d" }, "--expires-in must be more than zero"],
    [{ expiresIn: "-1d" }, "--expires-in must be"],
    [{ expiresAt: "tomorrow" }, "--expires-at must be an ISO-8601"],
    [{ expiresAt: "2025-12-31T00:00:00Z" }, "--expires-at must be in the future"],
    [{ expiresIn: "1d", expiresAt: "2026-02-01" }, "not both"],
    [{ expiresIn: "4000d" }, "at most ten years"],
  ])("refuses %o", (flags, message) => {
    expect(() => parseTokenExpiry(flags, NOW)).toThrow(message);
  });
});
