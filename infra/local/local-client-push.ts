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
  private readonly closers = new Map<string, () => void>();
  /** The local runtime's Slack progress and status forwarding (ClientPush `observe`). */
  observe?: (sessionId: string, message: { type: string } & Record<string, unknown>) => void | Promise<void>;

  /** `close` ends the socket from the server side (what API Gateway's DeleteConnection does). */
  register(connectionId: string, sender: ConnectionSender, close?: () => void): void {
    this.senders.set(connectionId, sender);
    if (close) this.closers.set(connectionId, close);
  }

  unregister(connectionId: string): void {
    this.senders.delete(connectionId);
    this.closers.delete(connectionId);
  }

  disconnect(connectionId: string): Promise<PushOutcome> {
    const close = this.closers.get(connectionId);
    if (!close) return Promise.resolve("gone");
    this.unregister(connectionId);
    close();
    return Promise.resolve("sent");
  }

  send(connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    const sender = this.senders.get(connectionId);
    if (!sender || !sender(message)) return Promise.resolve("gone");
    return Promise.resolve("sent");
  }
}
