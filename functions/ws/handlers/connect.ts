/**
 * WebSocket `$connect` (API.md "WebSocket"): query `sessionId` and either `token` (an API token)
 * or `ticket` (a single-use connect ticket, API.md v1.1, so browsers never put the API token in a
 * URL; consumed here, bound to its session, refused once used or expired, and only while the
 * API token that minted it is still valid). Authenticates,
 * checks the session belongs to the caller's org, registers the connection (idempotent, seed
 * 002 constraint 8), touches activity, and starts `ensure-runtime` when the session is not
 * running (connecting provisions or resumes the sandbox, seed 000 §2), judged from a read made
 * after the connection is registered (issue 25 §1: a flow pausing it meanwhile wakes it for us). A rejected connect is
 * the HTTP status of the refusal (401, 403, 404, 409), and registers nothing.
 */
import * as z from "zod";
import { unreadyConnectionExpiresAt } from "../../domain/connection-liveness";
import { ClientType, SessionId } from "../../domain/session";
import { AppError, UnauthorizedError, ValidationError } from "../../domain/errors";
import type { Principal } from "../../domain/principal";
import { principalForToken, describeZodError } from "../../http/http-handler";
import { loadOwnedSession } from "../../http/session-access";
import { startSessionFlow } from "../../http/session-actions";
import { errorForLog } from "../../observability/logger";
import type { WsDeps, WsEvent, WsResult } from "../ws-deps";
import { wsEntry } from "../lambda-entry";

export const ConnectQuery = z.object({
  sessionId: SessionId,
  token: z.string().min(1).max(512).optional(),
  ticket: z.string().min(1).max(512).optional(),
  clientType: ClientType.optional(),
});

const TICKET_SHAPE = /^wst_[A-Za-z0-9_-]{43}$/;

/** The principal a connect ticket grants for `sessionId` (consuming it), else `UnauthorizedError`. */
async function principalForTicket(deps: WsDeps, ticket: string, sessionId: string, now: Date): Promise<Principal> {
  // One message for every refusal: a caller learns nothing about which tickets exist.
  const refused = new UnauthorizedError("invalid, expired or already used ticket");
  if (!TICKET_SHAPE.test(ticket)) throw refused;
  const grant = await deps.wsTickets.consume(ticket, now);
  // Used up either way: a ticket shown for another session is burnt, not left for a second try.
  if (!grant || grant.sessionId !== sessionId || Date.parse(grant.expiresAt) <= now.getTime()) throw refused;
  if (grant.tokenHash === null) return { userId: grant.userId, orgId: grant.orgId, role: grant.role };
  // The API token that minted it, re-checked: revoked or expired since, the ticket is worth nothing.
  const principal = await deps.tokens.resolveTokenHash(grant.tokenHash, now);
  if (!principal || principal.orgId !== grant.orgId || principal.userId !== grant.userId) throw refused;
  return principal;
}

export function makeConnectHandler(deps: WsDeps): (event: WsEvent) => Promise<WsResult> {
  return async (event) => {
    const connectionId = event.requestContext.connectionId;
    try {
      const parsed = ConnectQuery.safeParse(event.queryStringParameters ?? {});
      if (!parsed.success) throw new ValidationError(describeZodError(parsed.error, "query"));
      const query = parsed.data;
      if ((query.token === undefined) === (query.ticket === undefined)) {
        throw new ValidationError("query: give exactly one of token (an API token) or ticket (from POST /v1/sessions/{id}/ws-ticket)");
      }
      const now = deps.now();
      const caller =
        query.ticket !== undefined
          ? await principalForTicket(deps, query.ticket, query.sessionId, now)
          : await principalForToken(query.token, deps.tokens, "token query parameter", now);
      const session = await loadOwnedSession(deps.sessions, caller, query.sessionId);
      if (session.status === "stopped") return { statusCode: 409, body: "session is stopped: cannot connect" };
      // Issue 14 item 5: the token's connections are findable by its id before the connection
      // counts, so a revoke that lists them never misses a registered one.
      if (caller.credential) await deps.tokens.trackConnection(caller.credential.tokenId, { connectionId, sessionId: session.id }, now);
      await deps.connections.add({
        connectionId,
        sessionId: session.id,
        userId: caller.userId,
        clientType: query.clientType ?? session.clientType,
        connectedAt: now.toISOString(),
        ...(caller.credential ? { tokenId: caller.credential.tokenId, tokenExpiresAt: caller.credential.expiresAt } : {}),
        // Short until send-init marks it ready: a connection that never gets its init stops counting soon.
        expiresAt: unreadyConnectionExpiresAt(now, deps.config.CONNECTION_TTL_SECONDS).toISOString(),
      });
      // A revoke that ran between the token check and the registration may have missed this
      // connection's lookup item: one more read settles it (revoked now: refused, nothing left).
      if (caller.credential && !(await deps.tokens.resolveTokenHash(caller.credential.tokenHash, now))) {
        await deps.connections.remove(session.id, connectionId);
        await deps.tokens.untrackConnection(caller.credential.tokenId, connectionId);
        throw new UnauthorizedError("invalid, expired or revoked API token");
      }
      // Before anything that may wait (seed 002 constraint 3). It also counts the connection
      // (`clientConnects`), after registering it: a flow whose commit shows the count it began
      // with knows its connection listing is complete (issue 15, flows/steps/finish.ts).
      await deps.sessions.touchActivity(session.id, now, { clientConnected: true });
      // Issue 25 §1: decide on the state read after this connection counts. A pause, idle
      // snapshot or migration that commits `paused` after this read sees the connection and
      // resumes the session itself (flows/wake-waiters.ts); one that committed before it is seen here.
      const current = (await deps.sessions.getSession(session.id)) ?? session;
      if (current.status !== "running" && current.status !== "stopped") await startSessionFlow(deps, current, "ensure-runtime", `user:${caller.userId}`, "connect");
      await deps.afterConnect({ connectionId, sessionId: session.id });
      deps.logger.info("client connected", { sessionId: session.id, connectionId });
      return { statusCode: 200 };
    } catch (err) {
      if (err instanceof AppError && err.expose) return { statusCode: err.status, body: err.message };
      deps.logger.error("connect failed", { connectionId, error: errorForLog(err) });
      return { statusCode: 500, body: "internal error" };
    }
  };
}

export const handler = wsEntry(makeConnectHandler);
