/**
 * Pushes a server message to every connected client of a session (API.md WebSocket). A
 * connection the push reports gone is removed, and so is one whose item expired (its client
 * vanished without a `$disconnect`, or never got its `init`: issue 14 §3), so the registry
 * converges without a sweeper. Push failures never fail a lifecycle step: clients re-read
 * state on reconnect (`init`).
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { isLiveConnection } from "../domain/connection-liveness";
import type { ClientStatus, SessionView } from "../domain/session";
import { errorForLog } from "../observability/logger";
import type { ClientPush } from "../ports/client-push";
import type { ClientConnection, ConnectionRegistry } from "../ports/session-items";

type SessionPreview = SessionView["preview"];

export interface BroadcastDeps {
  connections: ConnectionRegistry;
  push: ClientPush;
  logger: Logger;
  now: () => Date;
}

/**
 * `options.except`: a connection that is told otherwise (the sender of what is announced).
 * `options.connections`: the session's connections as the caller just listed them (issue 15: a
 * flow's Finish lists them once for this push and for waking joiners); listed here otherwise.
 */
export async function broadcast(
  deps: BroadcastDeps,
  sessionId: string,
  message: { type: string } & Record<string, unknown>,
  options: { except?: string; connections?: readonly ClientConnection[] } = {},
): Promise<number> {
  const now = deps.now();
  let sent = 0;
  // Awaited after the sends: a step that returns has handed its statuses to Slack (slack/status-forward.ts).
  const observed = Promise.resolve(deps.push.observe?.(sessionId, message)).catch((err: unknown) => deps.logger.warn("broadcast observer failed", { sessionId, error: errorForLog(err) }));
  await Promise.all(
    (options.connections ?? (await deps.connections.list(sessionId))).map(async (c) => {
      try {
        if (!isLiveConnection(c, now)) {
          await deps.connections.remove(sessionId, c.connectionId);
          return;
        }
        // Connections not yet sent their `init` get the current state with it instead (ws/send-init.ts).
        if (!c.ready || c.connectionId === options.except) return;
        const outcome = await deps.push.send(c.connectionId, message);
        if (outcome === "gone") await deps.connections.remove(sessionId, c.connectionId);
        else sent++;
      } catch (err) {
        deps.logger.warn("push failed", { sessionId, connectionId: c.connectionId, error: errorForLog(err) });
      }
    }),
  );
  await observed;
  return sent;
}

/**
 * A `status` frame. A `running` one carries the session's `preview` (issue 25 §7; null when its
 * sandbox exposes none): a client that connected before the session ran got `preview: null` in
 * its `init`, and this is where it learns the URL, as seed 001's "status -> running + tunnelUrls".
 */
export function statusFrame(status: ClientStatus, options: { message?: string | undefined; preview?: SessionPreview } = {}): { type: "status" } & Record<string, unknown> {
  return { type: "status", status, ...(options.message ? { message: options.message } : {}), ...(status === "running" ? { preview: options.preview ?? null } : {}) };
}

export function broadcastStatus(
  deps: BroadcastDeps,
  sessionId: string,
  status: ClientStatus,
  message?: string,
  options: { connections?: readonly ClientConnection[] | undefined; preview?: SessionPreview } = {},
): Promise<number> {
  const { connections, preview } = options;
  return broadcast(deps, sessionId, statusFrame(status, { message, ...(preview !== undefined ? { preview } : {}) }), connections ? { connections } : {});
}
