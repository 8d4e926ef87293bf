/**
 * GET /v1/sessions/{id} (API Gateway HTTP API route). The caller's org only (403/404 otherwise).
 */
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

export const makeGetSessionHandler = httpRoute(
  { name: "GetSession", auth: true, params: SessionPathParams },
  async ({ params, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    return { status: 200, body: { session: toSessionView(session, deps.now()) } };
  },
);

export const handler = lambdaEntry(makeGetSessionHandler);
