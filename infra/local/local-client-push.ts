/**
 * The local client push adapter: the local WebSocket server registers each socket's sender
 * here under its connection id; a connection with no sender, or whose socket is no longer open
 * (the sender refuses), is `gone` (so the flows delete its item), exactly as API Gateway's 410
 * makes the AWS adapter report it.
 */
import type { ClientPush, PushOutcome } from "../../functions/ports/client-push";

/** Sends one message; false when the socket is no longer open. */
export type ConnectionSender = (message: { type: string } & Record<string, unknown>) => boolean;

export class LocalClientPush implements ClientPush {
  private readonly senders = new Map<string, ConnectionSender>();

  register(connectionId: string, sender: ConnectionSender): void {
    this.senders.set(connectionId, sender);
  }

  unregister(connectionId: string): void {
    this.senders.delete(connectionId);
  }

  send(connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    const sender = this.senders.get(connectionId);
    if (!sender || !sender(message)) return Promise.resolve("gone");
    return Promise.resolve("sent");
  }
}
