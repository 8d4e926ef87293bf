/**
 * The local WebSocket API: plays API Gateway's WebSocket part on the local HTTP server's
 * `/ws` path. It builds the same `$connect` / `$default` / `$disconnect` events for the same
 * handlers (functions/ws/routes.ts), refuses the upgrade with the status `$connect` returned,
 * registers each open socket with the local client push, and sends `init` right after the
 * upgrade (where AWS invokes the send-init function asynchronously). Frames of one connection
 * are handled in order, like API Gateway's per-connection delivery.
 */
import { randomBytes } from "node:crypto";
import type { Server, IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { errorForLog } from "../../functions/observability/logger";
import { makeSendInitHandler } from "../../functions/ws/handlers/send-init";
import { WS_ROUTES } from "../../functions/ws/routes";
import type { WsDeps, WsEvent, WsResult } from "../../functions/ws/ws-deps";
import type { LocalClientPush } from "./local-client-push";

/** API Gateway WebSocket frames are at most 128 KB. */
const MAX_FRAME_BYTES = 128 * 1024;

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 500: "Internal Server Error" };

export interface LocalWsServer {
  path: string;
  /** Open sockets (tests close them to simulate clients leaving). */
  sockets(): number;
  close(): Promise<void>;
}

function handlerFor(deps: WsDeps, routeKey: string): (event: WsEvent) => Promise<WsResult> {
  const route = WS_ROUTES.find((r) => r.routeKey === routeKey);
  if (!route) throw new Error(`no WebSocket route ${routeKey}`);
  return route.make(deps);
}

function event(connectionId: string, routeKey: string, extra: Partial<WsEvent> = {}): WsEvent {
  const eventType = routeKey === "$connect" ? "CONNECT" : routeKey === "$disconnect" ? "DISCONNECT" : "MESSAGE";
  return { requestContext: { connectionId, routeKey, eventType, requestId: randomBytes(8).toString("hex") }, ...extra };
}

export function attachLocalWsServer(server: Server, deps: WsDeps, push: LocalClientPush, path = "/ws"): LocalWsServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const connect = handlerFor(deps, "$connect");
  const disconnect = handlerFor(deps, "$disconnect");
  const message = handlerFor(deps, "$default");
  const sendInit = makeSendInitHandler(deps);
  const inFlight = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p)).catch(() => undefined);
    return p;
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://local");
    if (url.pathname !== path) return;
    const connectionId = randomBytes(12).toString("base64url");
    const query = Object.fromEntries(url.searchParams.entries());
    void track(
      (async () => {
        const result = await connect(event(connectionId, "$connect", { queryStringParameters: query }));
        if (result.statusCode !== 200) {
          const status = result.statusCode;
          socket.end(`HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${result.body ?? ""}`);
          return;
        }
        wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
          push.register(connectionId, (msg) => {
            if (ws.readyState !== ws.OPEN) return false;
            ws.send(JSON.stringify(msg));
            return true;
          });
          let chain: Promise<unknown> = Promise.resolve();
          const inOrder = (work: () => Promise<unknown>) => {
            chain = track(chain.then(work).catch((err: unknown) => deps.logger.error("local ws: handler failed", { connectionId, error: errorForLog(err) })));
          };
          inOrder(() => sendInit({ connectionId, sessionId: query.sessionId ?? "" }));
          ws.on("message", (data, isBinary) => {
            const body = isBinary ? Buffer.from(data as Buffer).toString("base64") : data.toString();
            inOrder(() => message(event(connectionId, "$default", { body, isBase64Encoded: isBinary })));
          });
          ws.on("close", () => {
            push.unregister(connectionId);
            inOrder(() => disconnect(event(connectionId, "$disconnect")));
          });
        });
      })().catch((err: unknown) => {
        deps.logger.error("local ws: upgrade failed", { error: errorForLog(err) });
        socket.destroy();
      }),
    );
  };
  server.on("upgrade", onUpgrade);

  return {
    path,
    sockets: () => wss.clients.size,
    close: async () => {
      server.off("upgrade", onUpgrade);
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
  };
}
