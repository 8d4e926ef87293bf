/**
 * WebSocket `$connect` (API.md "WebSocket"): query `sessionId` and `token`. Authenticates,
 * checks the session belongs to the caller's org, registers the connection (idempotent, seed
 * 002 constraint 8), touches activity, and starts `ensure-runtime` when the session is not
 * running (connecting provisions or resumes the sandbox, seed 000 §2). A rejected connect is
 * the HTTP status of the refusal (401, 403, 404, 409), and registers nothing.
 */
import * as z from "zod";
import { ClientType, SessionId } from "../../domain/session";
import { AppError, ValidationError } from "../../domain/errors";
import { principalForToken, describeZodError } from "../../http/http-handler";
import { loadOwnedSession } from "../../http/session-access";
import { startSessionFlow } from "../../http/session-actions";
import { errorForLog } from "../../observability/logger";
import type { WsDeps, WsEvent, WsResult } from "../ws-deps";
import { wsEntry } from "../lambda-entry";

export const ConnectQuery = z.object({
  sessionId: SessionId,
  token: z.string().min(1).max(512),
  clientType: ClientType.optional(),
});

export function makeConnectHandler(deps: WsDeps): (event: WsEvent) => Promise<WsResult> {
  return async (event) => {
    const connectionId = event.requestContext.connectionId;
    try {
      const parsed = ConnectQuery.safeParse(event.queryStringParameters ?? {});
      if (!parsed.success) throw new ValidationError(describeZodError(parsed.error, "query"));
      const query = parsed.data;
      const caller = await principalForToken(query.token, deps.tokens, "token query parameter");
      const session = await loadOwnedSession(deps.sessions, caller, query.sessionId);
      if (session.status === "stopped") return { statusCode: 409, body: "session is stopped: cannot connect" };
      const now = deps.now();
      await deps.connections.add({
        connectionId,
        sessionId: session.id,
        userId: caller.userId,
        clientType: query.clientType ?? session.clientType,
        connectedAt: now.toISOString(),
      });
      // Before anything that may wait (seed 002 constraint 3).
      await deps.sessions.touchActivity(session.id, now);
      if (session.status !== "running") await startSessionFlow(deps, session, "ensure-runtime", `user:${caller.userId}`, "connect");
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
