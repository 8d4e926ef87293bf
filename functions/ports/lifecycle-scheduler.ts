/**
 * Lifecycle scheduler port: one-time named schedules per (session, purpose).
 * AWS adapter: EventBridge Scheduler `at(...)` schedules, `ActionAfterCompletion: DELETE`.
 * Local adapter: in-process timers with identical semantics: arming a name that exists
 * replaces it; a fired schedule is gone; cancel of an unknown name is a no-op.
 */
import * as z from "zod";

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

/**
 * What a fired schedule delivers to its target (the Lambda behind EventBridge Scheduler, or the
 * local scheduler's callback). `at` is the requested time (ISO 8601), not the delivery time:
 * a late or retried delivery still says which arming it belongs to.
 */
export const ScheduleFiredEvent = z.object({
  sessionId: z.string().min(1),
  purpose: z.enum(SCHEDULE_PURPOSES),
  at: z.iso.datetime(),
});
export type ScheduleFiredEvent = z.infer<typeof ScheduleFiredEvent>;
