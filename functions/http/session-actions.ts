/**
 * What the lifecycle action routes share: the state check that makes an illegal request a 409
 * naming the current state (before anything changes), and starting the flow at the session's
 * current generation (its lease fence), so concurrent requests for the same work start one
 * execution between them.
 */
import { ConflictError } from "../domain/errors";
import { toSessionView, type SessionRecord, type SessionStatus } from "../domain/session";
import type { FlowName, StartFlowResult } from "../ports/flow-runner";
import { httpRoute, type HttpDeps, type HttpHandler } from "./http-handler";
import { loadOwnedSessionWithFence, requirePrincipal, SessionPathParams } from "./session-access";

export function requireStatus(session: SessionRecord, allowed: readonly SessionStatus[], action: string): void {
  if (!allowed.includes(session.status)) {
    throw new ConflictError(`session is ${session.status}: cannot ${action}`, { context: { sessionId: session.id, status: session.status } });
  }
}

export async function startSessionFlow(
  deps: Pick<HttpDeps, "sessions" | "flows">,
  session: SessionRecord,
  flow: FlowName,
  actor: string,
  reason?: string,
  /** The lease fence read with `session` (one read, issue 15); read here when not given. */
  fence?: number,
): Promise<StartFlowResult> {
  const generation = fence ?? (await deps.sessions.readLease(session.id))?.fence ?? 0;
  return deps.flows.start({ flow, sessionId: session.id, generation, actor, ...(reason ? { reason } : {}) });
}

export interface LifecycleActionSpec {
  /** Route name (metrics, logs). */
  name: string;
  flow: FlowName;
  /** Statuses in which the request is accepted; anything else is a 409 naming the status. */
  allowed: readonly SessionStatus[];
  /** For the 409 message: "session is paused: cannot <action>". */
  action: string;
  reason: string;
  /** Statuses in which the work is already done: 202 without starting a flow. */
  alreadyDone?: readonly SessionStatus[];
  /** Touch activity before starting the flow (seed 002 constraint 3: before it can block). */
  touchActivity?: boolean;
}

/** `POST /v1/sessions/{id}/<action>` and `DELETE`: check the state, start the flow, 202 at once. */
export function lifecycleActionRoute(spec: LifecycleActionSpec): (deps: HttpDeps) => HttpHandler {
  return httpRoute({ name: spec.name, auth: true, params: SessionPathParams }, async ({ params, principal }, deps) => {
    const caller = requirePrincipal(principal);
    const { session, fence } = await loadOwnedSessionWithFence(deps.sessions, caller, params.id);
    requireStatus(session, spec.allowed, spec.action);
    if (spec.touchActivity) await deps.sessions.touchActivity(session.id, deps.now());
    if (!spec.alreadyDone?.includes(session.status)) await startSessionFlow(deps, session, spec.flow, `user:${caller.userId}`, spec.reason, fence);
    return { status: 202, body: { session: toSessionView(session, deps.now()) } };
  });
}
