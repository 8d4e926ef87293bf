import * as z from "zod";
import { ForbiddenError, NotFoundError } from "../domain/errors";
import type { Principal } from "../domain/principal";
import { SessionId, type SessionRecord } from "../domain/session";
import type { SessionStore } from "../ports/session-store";

/** `{id}` of every `/v1/sessions/{id}/...` route. */
export const SessionPathParams = z.object({ id: SessionId }).strict();

/**
 * A session is visible only to its org: unknown ids are 404, another org's session is 403
 * (API.md: "403 not yours, 404 unknown id").
 */
export async function loadOwnedSession(sessions: SessionStore, principal: Principal, sessionId: string): Promise<SessionRecord> {
  const session = await sessions.getSession(sessionId);
  if (!session) throw new NotFoundError(`session ${sessionId} not found`);
  if (session.orgId !== principal.orgId) throw new ForbiddenError(`session ${sessionId} belongs to another organization`);
  return session;
}

/**
 * `loadOwnedSession` with the session's lease fence from the same read (issue 15: a lifecycle
 * route names its flow execution after the fence without a second read).
 */
export async function loadOwnedSessionWithFence(sessions: SessionStore, principal: Principal, sessionId: string): Promise<{ session: SessionRecord; fence: number }> {
  const found = await sessions.getSessionWithLease(sessionId);
  if (!found) throw new NotFoundError(`session ${sessionId} not found`);
  if (found.session.orgId !== principal.orgId) throw new ForbiddenError(`session ${sessionId} belongs to another organization`);
  return { session: found.session, fence: found.lease.fence };
}

export function requirePrincipal(principal: Principal | null): Principal {
  if (!principal) throw new Error("route declared auth: true but has no principal");
  return principal;
}

/** Routes marked admin (API.md "Roles") answer 403 to a member. */
export function requireAdmin(principal: Principal | null): Principal {
  const caller = requirePrincipal(principal);
  if (caller.role !== "admin") throw new ForbiddenError("this route needs the admin role", { context: { role: caller.role } });
  return caller;
}
