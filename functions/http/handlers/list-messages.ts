/**
 * GET /v1/sessions/{id}/messages: the persisted transcript, oldest first, readable in every
 * status (also while paused, and after a sandbox was lost). `?limit=` (1-200, default 100),
 * `?cursor=` from the previous page.
 */
import { ListMessagesQuery } from "../../contract/requests";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

export { ListMessagesQuery };

export const makeListMessagesHandler = httpRoute(
  { name: "ListMessages", auth: true, params: SessionPathParams, query: ListMessagesQuery },
  async ({ params, query, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    const page = await deps.transcript.list(session.id, { limit: query.limit, cursor: query.cursor ?? null });
    return { status: 200, body: { items: page.items, nextCursor: page.nextCursor } };
  },
);

export const handler = lambdaEntry(makeListMessagesHandler);
