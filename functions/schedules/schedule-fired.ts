/**
 * The target of every lifecycle schedule (EventBridge Scheduler in AWS, timers locally).
 * `expiry` fires at `sandboxExpiresAt - EXPIRY_MIGRATION_LEAD_SECONDS` and starts `migrate`;
 * the flow re-reads the session under the lease and decides between moving to a new sandbox
 * and pausing. The generation is the lease fence, so a duplicate delivery of the same firing
 * joins the execution it already started. `idle-check` fires when a session's idle grace runs
 * out and evaluates the idle predicate from fresh state (idle/idle-check.ts).
 */
import { ScheduleFiredEvent } from "../ports/lifecycle-scheduler";
import type { FlowDeps } from "../flows/flow-deps";
import { runIdleCheck, type IdleCheckDeps } from "../idle/idle-check";
import { stepEntry } from "../flows/lambda-entry";

export type ScheduleFiredDeps = Pick<FlowDeps, "sessions" | "flows" | "logger"> & IdleCheckDeps;

export function makeScheduleFiredHandler(deps: ScheduleFiredDeps): (event: unknown) => Promise<{ started: string | null }> {
  return async (event) => {
    const fired = ScheduleFiredEvent.parse(event);
    const lease = await deps.sessions.readLease(fired.sessionId);
    if (!lease) {
      deps.logger.info("schedule fired for a deleted session", { ...fired });
      return { started: null };
    }
    switch (fired.purpose) {
      case "expiry": {
        const result = await deps.flows.start({ flow: "migrate", sessionId: fired.sessionId, generation: lease.fence, actor: "schedule:expiry", reason: "sandbox expiry" });
        return { started: result.executionName };
      }
      case "idle-check": {
        const result = await runIdleCheck(deps, { sessionId: fired.sessionId, at: new Date(fired.at) });
        return { started: result.started };
      }
    }
  };
}

export const handler = stepEntry((deps) => makeScheduleFiredHandler(deps));
