/**
 * WebSocket `$disconnect`: removes the connection (idempotent: a second disconnect, or one for
 * a connection a push already found gone, is a no-op) and touches activity, so the idle grace
 * counts from the moment the last client left, then arms the idle check for when that grace
 * runs out (seed 002: the last client leaving is when a session may become idle).
 */
import { armIdleCheck } from "../../idle/idle-check";
import { errorForLog } from "../../observability/logger";
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
      if ((await deps.connections.listLive(connection.sessionId, deps.now())).length === 0) await armIdleCheck(deps, connection.sessionId, "last client disconnected");
      deps.logger.info("client disconnected", { sessionId: connection.sessionId, connectionId });
      return { statusCode: 200 };
    } catch (err) {
      deps.logger.error("disconnect failed", { connectionId, error: errorForLog(err) });
      return { statusCode: 500 };
    }
  };
}

export const handler = wsEntry(makeDisconnectHandler);
