/**
 * Pushes a server message to every connected client of a session (API.md WebSocket). A
 * connection the push reports gone is removed, so the registry converges without a sweeper.
 * Push failures never fail a lifecycle step: clients re-read state on reconnect (`init`).
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { ClientStatus } from "../domain/session";
import { errorForLog } from "../observability/logger";
import type { ClientPush } from "../ports/client-push";
import type { ConnectionRegistry } from "../ports/session-items";

export interface BroadcastDeps {
  connections: ConnectionRegistry;
  push: ClientPush;
  logger: Logger;
}

export async function broadcast(deps: BroadcastDeps, sessionId: string, message: { type: string } & Record<string, unknown>): Promise<number> {
  // Connections not yet sent their `init` get the current state with it instead (ws/send-init.ts).
  const connections = (await deps.connections.list(sessionId)).filter((c) => c.ready);
  let sent = 0;
  await Promise.all(
    connections.map(async (c) => {
      try {
        const outcome = await deps.push.send(c.connectionId, message);
        if (outcome === "gone") await deps.connections.remove(sessionId, c.connectionId);
        else sent++;
      } catch (err) {
        deps.logger.warn("push failed", { sessionId, connectionId: c.connectionId, error: errorForLog(err) });
      }
    }),
  );
  return sent;
}

export function broadcastStatus(deps: BroadcastDeps, sessionId: string, status: ClientStatus, message?: string): Promise<number> {
  return broadcast(deps, sessionId, { type: "status", status, ...(message ? { message } : {}) });
}
