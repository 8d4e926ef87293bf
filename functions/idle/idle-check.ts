/**
 * Event-driven idle checks (ARCHITECTURE.md §1: replaces the seed's 30 s `setInterval` in every
 * hub). Whenever a session may have become idle — the last client left, the agent went idle, a
 * proxy closed, the session started running, an idle snapshot failed — `armIdleCheck` sets the
 * session's one-time `idle-check` schedule for the moment its grace runs out. When it fires,
 * `runIdleCheck` reads fresh state and evaluates the predicate: idle -> start `idle-snapshot`;
 * still in grace because activity moved -> re-arm for the new expiry (lazily: activity itself
 * never touches the schedule); anything else -> nothing, because whatever clears that blocker
 * arms its own check. No session is ever polled; the sweeper is the backstop.
 */
import type { SessionRecord } from "../domain/session";
import type { FlowDeps } from "../flows/flow-deps";
import { errorForLog } from "../observability/logger";
import type { RelayLeaseStore } from "../ports/relay";
import { evaluateIdle, type IdleFacts, type IdleMode, type IdleVerdict } from "./idle-predicate";

export type IdleFactsDeps = Pick<FlowDeps, "sessions" | "connections" | "proxies" | "prompts" | "now"> & { relayLeases: Pick<RelayLeaseStore, "watched"> };

/**
 * The predicate's inputs from the session's partition (strongly consistent where it matters).
 * `session`: a record the caller has just read (under the lease), so it is not read twice.
 * Null: no session.
 */
export async function readIdleFacts(deps: IdleFactsDeps, sessionId: string, known?: SessionRecord): Promise<IdleFacts | null> {
  const session = known ?? (await deps.sessions.getSession(sessionId));
  if (!session) return null;
  const now = deps.now();
  const [clients, proxies, relayWatching, pending] = await Promise.all([
    // Only connections that count: an item whose client vanished without a $disconnect expires (issue 14 §3).
    deps.connections.listLive(sessionId, now),
    deps.proxies.listLive(sessionId, now),
    deps.relayLeases.watched(sessionId, now),
    // Queued and processing: one read of the open prompts (two before, each of every prompt the session ever had).
    deps.prompts.listOpen(sessionId),
  ]);
  return {
    session,
    clients: clients.length,
    proxies: proxies.length,
    relayWatching,
    pendingPrompts: pending.length,
    now,
  };
}

export async function evaluateSessionIdle(deps: IdleFactsDeps & Pick<FlowDeps, "config">, sessionId: string, mode: IdleMode): Promise<IdleVerdict | null> {
  const facts = await readIdleFacts(deps, sessionId);
  return facts ? evaluateIdle(facts, mode, deps.config) : null;
}

export type ArmDeps = Pick<FlowDeps, "sessions" | "scheduler" | "config" | "now" | "logger">;

/**
 * Arms the session's idle check for when its grace runs out (now, if it already has). Only
 * running sessions with a sandbox can go idle; for any other the call does nothing. Best effort:
 * a failure is logged, never thrown at the caller (a client disconnecting must not fail because
 * a schedule could not be written); the sweeper catches what a lost arm misses.
 */
export async function armIdleCheck(deps: ArmDeps, sessionId: string, why: string, known?: SessionRecord): Promise<Date | null> {
  try {
    // `known`: a record the caller has just written or read (a flow's commit), so it is not read again.
    const session = known ?? (await deps.sessions.getSession(sessionId));
    if (!session || session.status !== "running" || !session.sandboxId) return null;
    const { graceExpiresAt } = evaluateIdle(
      { session, clients: 0, proxies: 0, relayWatching: true, pendingPrompts: 0, now: deps.now() },
      "inactivity",
      deps.config,
    );
    const at = new Date(Math.max(graceExpiresAt.getTime(), deps.now().getTime()));
    await deps.scheduler.arm({ sessionId, purpose: "idle-check" }, at);
    return at;
  } catch (err) {
    deps.logger.error("idle check not armed", { sessionId, why, error: errorForLog(err) });
    return null;
  }
}

export type IdleCheckDeps = IdleFactsDeps & Pick<FlowDeps, "scheduler" | "flows" | "config" | "logger">;

export interface IdleCheckResult {
  verdict: IdleVerdict | null;
  started: string | null;
  rearmedAt: Date | null;
}

/**
 * The `idle-check` schedule fired. `at` is the time it was armed for: EventBridge Scheduler
 * invokes within the minute, so a delivery may come up to IDLE_CHECK_MAX_EARLY_SECONDS early.
 * An early delivery does not wait here (issue 15: up to a minute of billed Lambda per check):
 * it judges the session as of `at` and, if it will be idle then, starts `idle-snapshot` at once
 * with `notBefore: at`; the flow's first state (a Step Functions Wait, one state transition)
 * holds Begin until then, and Begin re-checks the whole predicate under the lease, so activity
 * during the wait still aborts it. The lag from grace expiry to the snapshot's start stays about
 * the Wait's precision plus Begin, not up to a minute.
 */
export async function runIdleCheck(deps: IdleCheckDeps, input: { sessionId: string; at: Date; actor?: string }): Promise<IdleCheckResult> {
  const now = deps.now();
  const early = input.at.getTime() - now.getTime();
  const isEarly = early > 0 && early <= deps.config.IDLE_CHECK_MAX_EARLY_SECONDS * 1000;
  const due = isEarly ? input.at : now;
  const facts = await readIdleFacts(deps, input.sessionId);
  if (!facts) return { verdict: null, started: null, rearmedAt: null };
  // As of the time the check is for: an early delivery sees the grace as run out if nothing moved it.
  const verdict = evaluateIdle({ ...facts, now: due }, "inactivity", deps.config);
  if (verdict.idle) {
    const lease = await deps.sessions.readLease(input.sessionId);
    const { executionName } = await deps.flows.start({
      flow: "idle-snapshot",
      sessionId: input.sessionId,
      generation: lease?.fence ?? 0,
      actor: input.actor ?? "schedule:idle-check",
      reason: "inactivity",
      // Early: wait (in the flow) for the time the check was armed for. On time or late: no wait.
      ...(isEarly ? { notBefore: input.at.toISOString() } : {}),
    });
    return { verdict, started: executionName, rearmedAt: null };
  }
  if (verdict.recheckAt) {
    await deps.scheduler.arm({ sessionId: input.sessionId, purpose: "idle-check" }, verdict.recheckAt);
    return { verdict, started: null, rearmedAt: verdict.recheckAt };
  }
  deps.logger.info("idle check: not idle", { sessionId: input.sessionId, reason: verdict.reason });
  return { verdict, started: null, rearmedAt: null };
}
