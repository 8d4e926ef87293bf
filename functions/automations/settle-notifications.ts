/**
 * The end of a Lambda invocation that may have ended automation runs (automation-fired, the
 * `/v1/automations` routes, RecordFailure): their notifications (run-notifier.ts) are fired and
 * never awaited by the run's end, but a Lambda is frozen once its handler returns, and a frozen
 * function loses the webhook POST and its retries. No dependencies: RecordFailure loads the
 * automations' modules only for an automation run's session.
 */
import type { Context } from "aws-lambda";

/** What is awaited: `HttpRunNotifier.settled`. */
export interface Notifications {
  settled(): Promise<void>;
}

/** At most this long, and at most the invocation's remaining time less NOTIFY_SETTLE_MARGIN_MS. */
export const NOTIFY_SETTLE_CAP_MS = 20_000;
export const NOTIFY_SETTLE_MARGIN_MS = 2_000;

/**
 * A Lambda handler that, once its own work is done (the run's end is already written), waits for
 * the notifications it fired: min(remaining time - 2 s, 20 s) at most, then returns anyway
 * (what is still pending then may be lost with the frozen container).
 * `notifier`: the composition's, or undefined when none was built for this invocation.
 */
export function settlingNotifications<E, R>(handler: (event: E, context: Context) => Promise<R>, notifier: () => Notifications | undefined): (event: E, context: Context) => Promise<R> {
  return async (event, context) => {
    try {
      return await handler(event, context);
    } finally {
      const pending = notifier();
      if (pending) {
        const capMs = Math.max(0, Math.min(context.getRemainingTimeInMillis() - NOTIFY_SETTLE_MARGIN_MS, NOTIFY_SETTLE_CAP_MS));
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([pending.settled(), new Promise<void>((resolve) => (timer = setTimeout(resolve, capMs)))]);
        clearTimeout(timer);
      }
    }
  };
}

