/**
 * GET /v1/sessions (API Gateway HTTP API route). The caller's org's sessions, newest first,
 * `?status=`, `?limit=` (1-100, default 20), `?cursor=` from the previous page's `nextCursor`.
 */
import { ListSessionsQuery } from "../../contract/requests";
import { toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";

export { ListSessionsQuery };

export const makeListSessionsHandler = httpRoute(
  { name: "ListSessions", auth: true, query: ListSessionsQuery },
  async ({ query, principal }, deps) => {
    const page = await deps.sessions.listSessionsByOrg(requirePrincipal(principal).orgId, {
      limit: query.limit,
      cursor: query.cursor ?? null,
      status: query.status,
    });
    return { status: 200, body: { items: page.items.map((s) => toSessionView(s, deps.now())), nextCursor: page.nextCursor } };
  },
);

export const handler = lambdaEntry(makeListSessionsHandler);
