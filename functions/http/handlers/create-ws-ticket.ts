/**
 * POST /v1/sessions/{id}/ws-ticket (API.md v1.1 "WebSocket connect tickets", issue 14 item 5).
 * A browser cannot set headers on a WebSocket, and a `token=` in the URL ends up in logs and
 * history: it asks for a ticket with its API token in the header instead, then connects with
 * `?sessionId=<id>&ticket=<ticket>`. Steps: the caller's org must own the session (403 another
 * org's, 404 unknown, as every session route), a stopped session is 409 (connect would refuse
 * it); mint 256 random bits, store only their SHA-256 with the session, the caller and the API
 * token it came from, for `WS_TICKET_TTL_SECONDS`; answer `201 {ticket, expiresAt}`. `$connect`
 * consumes it (single use) and re-checks that token.
 */
import { ConflictError } from "../../domain/errors";
import { newWsTicket } from "../../domain/ids";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

/** API.md: "single use, at most 60 s". */
export const WS_TICKET_TTL_SECONDS = 60;

export const makeCreateWsTicketHandler = httpRoute(
  { name: "CreateWsTicket", auth: true, params: SessionPathParams },
  async ({ params, principal }, deps) => {
    const caller = requirePrincipal(principal);
    const session = await loadOwnedSession(deps.sessions, caller, params.id);
    if (session.status === "stopped") throw new ConflictError("session is stopped: cannot connect");
    const now = deps.now();
    // Never past the API token's own expiry: a ticket must not outlive what minted it.
    const tokenExpiry = caller.credential?.expiresAt ? Date.parse(caller.credential.expiresAt) : Number.POSITIVE_INFINITY;
    const expiresAt = new Date(Math.min(now.getTime() + WS_TICKET_TTL_SECONDS * 1000, tokenExpiry)).toISOString();
    const ticket = newWsTicket();
    await deps.wsTickets.issue(
      ticket,
      { sessionId: session.id, userId: caller.userId, orgId: caller.orgId, role: caller.role, tokenHash: caller.credential?.tokenHash ?? null, expiresAt },
      now,
    );
    return { status: 201, headers: { "cache-control": "no-store" }, body: { ticket, expiresAt } };
  },
);

export const handler = lambdaEntry(makeCreateWsTicketHandler);
