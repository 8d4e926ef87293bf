/**
 * The typed client of the public contract (API.md): HTTP (./http.ts) and a reconnecting session
 * WebSocket (./session-socket.ts) that assembles the streamed transcript idempotently
 * (./transcript.ts). Runs in Node 20 and in browsers: no Node imports here; Node passes the `ws`
 * package's class as `WebSocket`. Types come from the server's zod schemas (functions/contract).
 */
import { ApiClient } from "./http";
import { SessionSocket, type WebSocketConstructor } from "./session-socket";

export { ApiClient, ApiError, type ApiClientOptions, type Contract, type ServerFrame } from "./http";
export { SessionSocket, type SessionSocketOptions, type SocketAuth, type SocketState, type WebSocketConstructor, type WebSocketLike } from "./session-socket";
export { Transcript, type TranscriptChange, type PendingPrompt, type TurnMessage, type TurnPart, type TextPart, type ToolPart } from "./transcript";
export type { ClientFrame, SessionView, TranscriptMessageView } from "../../functions/contract/frames";

export interface OpenSessionSocketOptions {
  /** Default: `GET /v1/health`'s `wsUrl`. */
  wsUrl?: string;
  WebSocket?: WebSocketConstructor;
  /**
   * `ticket` (default; what browsers must use): a fresh single-use ticket for every connect.
   * `token`: the API token in the URL (command-line clients).
   */
  auth?: "ticket" | "token";
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number } | false;
}

/** A session's WebSocket, authenticated like `api`, connected (resolves once open). */
export async function openSessionSocket(api: ApiClient, token: string, sessionId: string, options: OpenSessionSocketOptions = {}): Promise<SessionSocket> {
  let wsUrl = options.wsUrl;
  if (!wsUrl) {
    const health = await api.health();
    if (!health.wsUrl) throw new Error("the API did not tell its WebSocket URL (GET /v1/health wsUrl is null)");
    wsUrl = health.wsUrl;
  }
  const socket = new SessionSocket({
    wsUrl,
    sessionId,
    auth: options.auth === "token" ? { token } : { ticket: async () => (await api.createWsTicket(sessionId)).ticket },
    ...(options.WebSocket ? { WebSocket: options.WebSocket } : {}),
    ...(options.reconnect !== undefined ? { reconnect: options.reconnect } : {}),
  });
  await socket.connect();
  return socket;
}
