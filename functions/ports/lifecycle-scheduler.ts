/**
 * Lifecycle scheduler port: one-time named schedules per (session, purpose).
 * AWS adapter: EventBridge Scheduler `at(...)` schedules, `ActionAfterCompletion: DELETE`.
 * Local adapter: in-process timers with identical semantics: arming a name that exists
 * replaces it; a fired schedule is gone; cancel of an unknown name is a no-op.
 */
export const SCHEDULE_PURPOSES = ["expiry", "idle-check"] as const;
export type SchedulePurpose = (typeof SCHEDULE_PURPOSES)[number];

export interface ScheduleTarget {
  sessionId: string;
  purpose: SchedulePurpose;
}

export interface LifecycleScheduler {
  /** Arms (or re-arms, replacing) the schedule for (session, purpose) to fire at `at`. */
  arm(target: ScheduleTarget, at: Date): Promise<void>;
  /** Deletes the schedule; unknown names are a no-op. */
  cancel(target: ScheduleTarget): Promise<void>;
}

/** Schedule names: deterministic per (session, purpose), within EventBridge's 64-character limit. */
export function scheduleName(target: ScheduleTarget): string {
  return `${target.purpose}-${target.sessionId}`.slice(0, 64);
}
