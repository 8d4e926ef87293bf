/**
 * What the lifecycle action routes share: the state check that makes an illegal request a 409
 * naming the current state (before anything changes), and starting the flow at the session's
 * current generation (its lease fence), so concurrent requests for the same work start one
 * execution between them.
 */
import { ConflictError } from "../domain/errors";
import type { SessionRecord, SessionStatus } from "../domain/session";
import type { FlowName, StartFlowResult } from "../ports/flow-runner";
import type { HttpDeps } from "./http-handler";

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
): Promise<StartFlowResult> {
  const lease = await deps.sessions.readLease(session.id);
  return deps.flows.start({ flow, sessionId: session.id, generation: lease?.fence ?? 0, actor, ...(reason ? { reason } : {}) });
}
