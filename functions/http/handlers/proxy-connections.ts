/**
 * PUT /v1/sessions/{id}/proxy-connections/{proxyId} and DELETE on the same path (seed 002
 * constraint 8, verification 6 and 8). A terminal or editor WebSocket that reaches the sandbox
 * outside the session's WebSocket API registers here while it is open, so the idle predicate
 * sees it; it refreshes the registration (PUT again) within PROXY_CONNECTION_TTL_SECONDS, or it
 * stops counting. Both calls touch activity first (constraint 3). Idempotent by id: a second PUT
 * refreshes, a second DELETE is a no-op — presence is a set, so it can never drift.
 * DELETE arms the idle check: the proxy closing may be what makes the session idle.
 */
import * as z from "zod";
import { ConflictError } from "../../domain/errors";
import { SessionId } from "../../domain/session";
import { armIdleCheck } from "../../idle/idle-check";
import { httpRoute } from "../http-handler";
import { loadOwnedSession, requirePrincipal } from "../session-access";

export const ProxyPathParams = z
  .object({
    id: SessionId,
    proxyId: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, "must be 1-128 characters of letters, digits, '_', '.', ':' or '-'"),
  })
  .strict();

export const ProxyConnectionBody = z.object({ kind: z.enum(["terminal", "editor", "preview", "ssh", "other"]).default("other") }).strict();

export const makePutProxyConnectionHandler = httpRoute(
  { name: "PutProxyConnection", auth: true, params: ProxyPathParams, body: ProxyConnectionBody },
  async ({ params, body, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    if (session.status === "stopped") throw new ConflictError("session is stopped: there is no sandbox to connect to");
    const now = deps.now();
    await deps.sessions.touchActivity(session.id, now);
    const expiresAt = new Date(now.getTime() + deps.config.PROXY_CONNECTION_TTL_SECONDS * 1000).toISOString();
    const connection = { proxyId: params.proxyId, sessionId: session.id, kind: body.kind, openedAt: now.toISOString(), expiresAt };
    await deps.proxies.put(connection);
    return { status: 200, body: { proxyConnection: { proxyId: connection.proxyId, kind: connection.kind, expiresAt } } };
  },
);

export const makeDeleteProxyConnectionHandler = httpRoute(
  { name: "DeleteProxyConnection", auth: true, params: ProxyPathParams },
  async ({ params, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    await deps.sessions.touchActivity(session.id, deps.now());
    if (await deps.proxies.remove(session.id, params.proxyId)) await armIdleCheck(deps, session.id, "proxy connection closed");
    return { status: 204 };
  },
);
