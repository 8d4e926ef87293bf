/**
 * Client push port: sends a server message to one WebSocket connection.
 * AWS adapter: API Gateway Management API `PostToConnection`. Local adapter: the local
 * WebSocket server. A connection that is gone (410) is reported as `gone` so the caller deletes
 * its connection item.
 */
export type PushOutcome = "sent" | "gone";

export interface ClientPush {
  send(connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome>;
  /**
   * Closes the connection from the server side (API Gateway `DeleteConnection`; locally the
   * socket); `gone` when it was already closed. Its `$disconnect` follows as for any close.
   */
  disconnect(connectionId: string): Promise<PushOutcome>;
  /**
   * Sees every message broadcast to a session's clients, once per broadcast (services/broadcast.ts):
   * Slack progress (functions/slack/status-line.ts) and the flows' status forwarding to the Slack
   * queue (functions/slack/status-forward.ts), whose promise the broadcast awaits. Must not throw.
   */
  observe?: (sessionId: string, message: { type: string } & Record<string, unknown>) => void | Promise<void>;
}
