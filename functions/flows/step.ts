/**
 * The wrapper every flow step shares: parse the flow document, time the step, log it, keep the
 * flow's session lease alive while the step runs, and turn any escaping error into a
 * `StepError` whose name the ASL `Retry`/`Catch` rules match.
 *
 * The lease heartbeat: Begin takes the lease for LEASE_TTL_SECONDS, but provider work (a boot
 * with slow clones, a large snapshot) and its retries may take longer than that. Every step
 * after Begin renews the lease every LEASE_HEARTBEAT_FRACTION of the TTL while it runs, so the
 * lease only has to outlive the gap between two steps (a retry backoff, a cold start), not the
 * flow (test/infra/limits.test.ts checks that the limits nest). A renewal that finds the lease
 * taken over stops; the step's own lease checks and the guarded commit then fail as before.
 */
import { errorForLog } from "../observability/logger";
import type { FlowDeps } from "./flow-deps";
import { FlowDocument } from "./flow-document";
import { toStepError } from "./step-errors";

/** Renew the flow's lease every TTL x this while a step runs. */
export const LEASE_HEARTBEAT_FRACTION = 1 / 3;

export type StepHandler = (event: unknown) => Promise<unknown>;

export type StepFactory = (deps: FlowDeps) => StepHandler;

export function flowStep<R extends object>(name: string, run: (doc: FlowDocument, deps: FlowDeps) => Promise<R>): StepFactory {
  return (deps) => async (event) => {
    const started = Date.now();
    const doc = FlowDocument.parse(event);
    const log = { step: name, flow: doc.flow, sessionId: doc.sessionId, execution: doc.execution };
    const heartbeat = startLeaseHeartbeat(doc, deps);
    try {
      const result = await run(doc, deps);
      const ms = Date.now() - started;
      deps.logger.info("flow step done", { ...log, ms });
      return { ...result, ms };
    } catch (err) {
      const stepError = toStepError(err);
      deps.logger.warn("flow step failed", { ...log, ms: Date.now() - started, errorName: stepError.name, error: errorForLog(err) });
      throw stepError;
    } finally {
      heartbeat.stop();
    }
  };
}

/** Renews the lease `doc` holds (if any) until stopped; a lost lease ends the heartbeat. */
function startLeaseHeartbeat(doc: FlowDocument, deps: FlowDeps): { stop(): void } {
  const held = doc.begin?.lease;
  if (!held) return { stop: () => undefined };
  let lease = held;
  let stopped = false;
  const ttl = deps.config.LEASE_TTL_SECONDS;
  const timer = setInterval(() => {
    deps.sessions.renewLease(lease, deps.now(), ttl).then(
      (renewed) => {
        lease = renewed;
      },
      (err: unknown) => {
        if (stopped) return;
        clearInterval(timer);
        deps.logger.warn("flow lease not renewed", { sessionId: doc.sessionId, execution: doc.execution, error: errorForLog(err) });
      },
    );
  }, ttl * 1000 * LEASE_HEARTBEAT_FRACTION);
  timer.unref?.();
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/** The lease a step acts under; every step after `begin` has one. */
export function leaseOf(doc: FlowDocument): { sessionId: string; owner: string; fence: number; expiresAt: number } {
  if (!doc.begin) throw new Error(`flow document of ${doc.execution} has no lease (begin did not run)`);
  return doc.begin.lease;
}
