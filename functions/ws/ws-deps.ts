/**
 * What the WebSocket handlers may touch: the flow dependencies (store, prompt queue, push,
 * flows, agent) plus token lookup, the transcript, and how to send a new connection its
 * `init` once the connection is open (API Gateway cannot push to a connection during its own
 * `$connect`: the AWS adapter invokes the send-init function asynchronously; the local server
 * calls the same handler right after the upgrade completes).
 */
import type { FlowDeps } from "../flows/flow-deps";
import type { ApiTokenStore, TokenConnections } from "../ports/session-store";
import type { TranscriptStore } from "../ports/transcript";
import type { WsTicketStore } from "../ports/ws-tickets";

export interface SendInitRequest {
  connectionId: string;
  sessionId: string;
}

export interface WsDeps extends FlowDeps {
  /** Token lookup, and the connections each token opened (revoking a token closes them). */
  tokens: ApiTokenStore & TokenConnections;
  /** Connect tickets (`?ticket=`), consumed at `$connect`. */
  wsTickets: WsTicketStore;
  transcript: TranscriptStore;
  afterConnect(request: SendInitRequest): Promise<void>;
}

/** The API Gateway WebSocket event fields the handlers read (the v2 WebSocket event shape). */
export interface WsEvent {
  requestContext: { connectionId: string; routeKey: string; eventType?: string; requestId?: string };
  queryStringParameters?: Record<string, string | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
}

export interface WsResult {
  statusCode: number;
  body?: string;
}
