/** A `ClientPush` that records what each connection was sent (the flows' view of clients). */
import type { ClientPush, PushOutcome } from "../../functions/ports/client-push";

export class RecordingPush implements ClientPush {
  readonly sent: { connectionId: string; message: { type: string } & Record<string, unknown> }[] = [];
  /** Connections that report `gone` (closed sockets). */
  readonly gone = new Set<string>();

  send(connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    if (this.gone.has(connectionId)) return Promise.resolve("gone");
    this.sent.push({ connectionId, message });
    return Promise.resolve("sent");
  }

  disconnect(connectionId: string): Promise<PushOutcome> {
    if (this.gone.has(connectionId)) return Promise.resolve("gone");
    this.gone.add(connectionId);
    return Promise.resolve("sent");
  }

  statuses(connectionId?: string): string[] {
    return this.sent
      .filter((s) => s.message.type === "status" && (!connectionId || s.connectionId === connectionId))
      .map((s) => String(s.message.status));
  }
}
