/**
 * When a new API token expires (issue 14 item 5), from `token:create`'s flags: `--expires-in`
 * (`90d`, `12h`, `30m`, or a bare number of days) or `--expires-at` (an ISO-8601 time), at most one,
 * in the future and at most ten years ahead. Neither: the token never expires (undefined).
 * Pure: `now` is passed in. Errors name the flag.
 */
const UNIT_SECONDS: Record<string, number> = { m: 60, h: 3600, d: 86_400 };
const MAX_LIFETIME_MS = 10 * 365 * 86_400_000;

export function parseTokenExpiry(flags: { expiresIn?: string; expiresAt?: string }, now: Date): Date | undefined {
  if (flags.expiresIn !== undefined && flags.expiresAt !== undefined) throw new Error("give --expires-in or --expires-at, not both");
  let at: Date | undefined;
  if (flags.expiresIn !== undefined) {
    const match = /^(\d{1,6})([mhd]?)$/.exec(flags.expiresIn.trim());
    if (!match) throw new Error(`--expires-in must be a number of days or <n>m, <n>h, <n>d (got "${flags.expiresIn}")`);
    const seconds = Number(match[1]) * (UNIT_SECONDS[match[2] || "d"] ?? 86_400);
    if (seconds <= 0) throw new Error("--expires-in must be more than zero");
    at = new Date(now.getTime() + seconds * 1000);
  } else if (flags.expiresAt !== undefined) {
    const ms = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(flags.expiresAt) ? Date.parse(flags.expiresAt) : Number.NaN;
    if (Number.isNaN(ms)) throw new Error(`--expires-at must be an ISO-8601 date or time, e.g. 2027-01-31T00:00:00Z (got "${flags.expiresAt}")`);
    if (ms <= now.getTime()) throw new Error("--expires-at must be in the future");
    at = new Date(ms);
  }
  if (at && at.getTime() - now.getTime() > MAX_LIFETIME_MS) throw new Error("a token may live at most ten years");
  return at;
}
