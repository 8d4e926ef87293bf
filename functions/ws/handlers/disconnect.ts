/**
 * WebSocket `$disconnect`: removes the connection (idempotent: a second disconnect, or one for
 * a connection a push already found gone, is a no-op) and touches activity, so the idle grace
 * counts from the moment the last client left, then arms the idle check for when that grace
 * runs out (seed 002: the last client leaving is when a session may become idle). When it was
 * its user's last live connection, the session's other clients hear `user.left {userId}`
 * (seed 001, issue 25 §6).
 */
import { armIdleCheck } from "../../idle/idle-check";
import { errorForLog } from "../../observability/logger";
import { broadcast } from "../../services/broadcast";
import type { WsDeps, WsEvent, WsResult } from "../ws-deps";
import { wsEntry } from "../lambda-entry";

export function makeDisconnectHandler(deps: WsDeps): (event: WsEvent) => Promise<WsResult> {
  return async (event) => {
    const connectionId = event.requestContext.connectionId;
    try {
      const connection = await deps.connections.lookup(connectionId);
      if (!connection) return { statusCode: 200 };
      await deps.connections.remove(connection.sessionId, connectionId);
      if (connection.tokenId) await deps.tokens.untrackConnection(connection.tokenId, connectionId);
      await deps.sessions.touchActivity(connection.sessionId, deps.now()).catch(() => undefined);
      const live = await deps.connections.listLive(connection.sessionId, deps.now());
      if (live.length === 0) await armIdleCheck(deps, connection.sessionId, "last client disconnected");
      else if (!live.some((c) => c.userId === connection.userId)) await broadcast(deps, connection.sessionId, { type: "user.left", userId: connection.userId });
      deps.logger.info("client disconnected", { sessionId: connection.sessionId, connectionId });
      return { statusCode: 200 };
    } catch (err) {
      deps.logger.error("disconnect failed", { connectionId, error: errorForLog(err) });
      return { statusCode: 500 };
    }
  };
}

export const handler = wsEntry(makeDisconnectHandler);
