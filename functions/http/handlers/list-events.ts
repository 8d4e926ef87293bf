/**
 * GET /v1/sessions/{id}/events: the lifecycle audit trail, oldest first: each flow's outcome,
 * the transition it made (from, to), reason, actor, flow execution and per-step timings.
 * `?limit=` (1-100, default 50), `?cursor=` from the previous page.
 */
import { ListEventsQuery } from "../../contract/requests";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

export { ListEventsQuery };

export const makeListEventsHandler = httpRoute(
  { name: "ListEvents", auth: true, params: SessionPathParams, query: ListEventsQuery },
  async ({ params, query, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    const page = await deps.events.list(session.id, { limit: query.limit, cursor: query.cursor ?? null });
    return { status: 200, body: { items: page.items, nextCursor: page.nextCursor } };
  },
);

export const handler = lambdaEntry(makeListEventsHandler);
