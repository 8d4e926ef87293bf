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
import { LeaseLostError, NotFoundError } from "../domain/errors";
import type { SessionRecord } from "../domain/session";
import { errorForLog } from "../observability/logger";
import type { FlowDeps } from "./flow-deps";
import { FlowDocument } from "./flow-document";
import { CarryError, StepError, toStepError } from "./step-errors";

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
      if (err instanceof CarryError) {
        // Not a failure: the step's result leaves through the ASL Catch (see CarryError). Its own
        // `ms` (a part's duration) wins over the step's.
        const ms = Date.now() - started;
        deps.logger.info("flow step done", { ...log, ms, leaves: err.name });
        throw new StepError(err.name, JSON.stringify({ ...err.extra, [err.key]: { ms, ...err.carried } }));
      }
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

/**
 * The session and the proof that this flow still holds its lease, from one strongly consistent
 * read (issue 15: a destructive step used to read the session, then the lease). `LeaseLost` when
 * the lease was taken over or ran out (seed 002 verification 17); `SessionNotFound` when it is gone.
 */
export async function readUnderLease(doc: FlowDocument, deps: FlowDeps): Promise<SessionRecord> {
  const lease = leaseOf(doc);
  const found = await deps.sessions.getSessionWithLease(doc.sessionId);
  if (!found) throw new NotFoundError(`session ${doc.sessionId} not found`);
  assertLeaseHeld(lease, found.lease, deps.now());
  return found.session;
}

/**
 * Whether this flow certainly still holds its lease without reading it (issue 15: a destructive
 * step's lease check cost a read per flow). A lease is exclusive until it expires: nobody takes
 * an unexpired flow lease (only a free, expired or own one), and only its holder releases it. So
 * while `now` is more than half a TTL before the expiry Begin's take wrote, the lease is ours,
 * with half the TTL (30 s by default) as the margin for clock skew between two Lambdas. Past
 * that point (a long step, a slow retry) the caller reads the lease as before.
 */
export function leaseSurelyHeld(lease: { expiresAt: number }, now: Date, ttlSeconds: number): boolean {
  return now.getTime() < lease.expiresAt - (ttlSeconds * 1000) / 2;
}

/** Throws `LeaseLostError` unless `stored` is still `lease` (same owner and fence) and live at `now`. */
export function assertLeaseHeld(
  lease: { sessionId: string; owner: string; fence: number },
  stored: { owner: string | null; fence: number; expiresAt: number | null },
  now: Date,
): void {
  if (stored.owner !== lease.owner || stored.fence !== lease.fence || (stored.expiresAt ?? 0) <= now.getTime()) {
    throw new LeaseLostError(`session ${lease.sessionId}: lease of ${lease.owner} (fence ${lease.fence}) is no longer held`, {
      context: { sessionId: lease.sessionId, holder: stored.owner, fence: stored.fence },
    });
  }
}

/**
 * The session for a step that does not destroy anything (Provision): the record Begin's lease
 * take returned (no read), or a read for documents without it.
 */
export async function sessionOf(doc: FlowDocument, deps: FlowDeps): Promise<SessionRecord> {
  const session = doc.begin?.session ?? (await deps.sessions.getSession(doc.sessionId));
  if (!session) throw new NotFoundError(`session ${doc.sessionId} not found`);
  return session;
}
