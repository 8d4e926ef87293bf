/**
 * A WebSocket test client over a real socket: records every server message and waits on them,
 * and checks each against the contract (test/support/contract-frames.ts): what does not match
 * is collected in `TestWsClient.contractIssues` for a test to assert on.
 */
import WebSocket from "ws";
import { serverFrameIssues } from "./contract-frames";

export interface ServerMessage {
  type: string;
  [key: string]: unknown;
}

export class TestWsClient {
  /** Every way a frame any client of this process received differs from the contract. */
  static readonly contractIssues: string[] = [];
  readonly received: ServerMessage[] = [];
  private waiters: { predicate: (m: ServerMessage) => boolean; resolve: (m: ServerMessage) => void }[] = [];
  closed = false;

  private constructor(readonly socket: WebSocket) {
    socket.on("message", (data) => {
      const message = JSON.parse(data.toString()) as ServerMessage;
      this.received.push(message);
      for (const issue of serverFrameIssues(message)) TestWsClient.contractIssues.push(`${issue}: ${JSON.stringify(message).slice(0, 300)}`);
      this.waiters = this.waiters.filter((w) => {
        if (!w.predicate(message)) return true;
        w.resolve(message);
        return false;
      });
    });
    socket.on("close", () => {
      this.closed = true;
    });
  }

  /** Opens a connection; rejects with the HTTP status when the upgrade is refused. */
  static connect(wsUrl: string, query: Record<string, string>): Promise<TestWsClient> {
    const url = `${wsUrl}?${new URLSearchParams(query).toString()}`;
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url);
      const client = new TestWsClient(socket);
      socket.once("open", () => resolve(client));
      socket.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
      socket.once("error", reject);
    });
  }

  send(frame: unknown): void {
    this.socket.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  /** The first message (already received or future) matching `predicate`. */
  waitFor(predicate: (m: ServerMessage) => boolean, timeoutMs = 60_000, what = "a server message"): Promise<ServerMessage> {
    const seen = this.received.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.received.map((m) => m.type))}`)), timeoutMs);
      this.waiters.push({
        predicate,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  /** Waits for a message after the ones already received. */
  next(predicate: (m: ServerMessage) => boolean, timeoutMs = 60_000, what = "a new server message"): Promise<ServerMessage> {
    const from = this.received.length;
    return this.waitFor((m) => this.received.indexOf(m) >= from && predicate(m), timeoutMs, what);
  }

  statuses(): string[] {
    return this.received.filter((m) => m.type === "status").map((m) => String(m.status));
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.once("close", () => resolve());
      this.socket.close();
    });
  }
}
