/** Builders with overrides for session records and principals (STYLE.md 10). */
import { newSessionId } from "../../functions/domain/ids";
import { newSessionRecord, type SessionRecord } from "../../functions/domain/session";

export const T0 = new Date("2026-11-01T10:00:00.000Z");

export function buildSession(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return {
    ...newSessionRecord({ id: newSessionId(), orgId: "org-a", userId: "user-a", provider: "local", now: T0 }),
    ...overrides,
  };
}
