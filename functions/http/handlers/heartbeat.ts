/**
 * POST /v1/sessions/{id}/heartbeat (API Gateway HTTP API route).
 * Refreshes the idle grace through `touchActivity` and nothing else: it never resumes a paused
 * session (seed 002 §11b). 204; 409 for a stopped session (there is nothing left to keep alive).
 */
import { ConflictError } from "../../domain/errors";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

export const makeHeartbeatHandler = httpRoute(
  { name: "Heartbeat", auth: true, params: SessionPathParams },
  async ({ params, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    if (session.status === "stopped") throw new ConflictError(`session is stopped: heartbeat has no effect`);
    await deps.sessions.touchActivity(session.id, deps.now());
    return { status: 204 };
  },
);

export const handler = lambdaEntry(makeHeartbeatHandler);
