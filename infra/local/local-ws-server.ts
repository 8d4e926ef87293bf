/**
 * The local WebSocket API: plays API Gateway's WebSocket part on the local HTTP server's
 * `/ws` path. It builds the same `$connect` / `$default` / `$disconnect` events for the same
 * handlers (functions/ws/routes.ts), refuses the upgrade with the status `$connect` returned,
 * registers each open socket with the local client push, and sends `init` right after the
 * upgrade (where AWS invokes the send-init function asynchronously). Frames of one connection
 * are handled in order, like API Gateway's per-connection delivery.
 *
 * Hostile or broken clients must cost one connection, never the process (issue 14 §1, §3):
 * - every socket has an `error` listener from the moment it is handed over, before and after
 *   the upgrade (an unhandled `error` event would end the process and its sandboxes' control plane);
 * - an oversized frame closes that connection with 1009 (`ws` does, once an `error` listener exists);
 * - an upgrade on another path, or a malformed handshake, is answered (404 / 400) and closed
 *   before any handler runs;
 * - `$disconnect` runs exactly once for every connection `$connect` registered, however the
 *   socket goes: a clean close, a close without a close frame, a client gone while `$connect`
 *   was still running, a handshake `ws` aborted;
 * - a peer that stops answering pings (half-open) is dropped; an answer keeps its connection
 *   item's expiry fresh (API Gateway detects dead peers itself).
 */
import { randomBytes } from "node:crypto";
import type { Server, IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { connectionExpiresAt } from "../../functions/domain/connection-liveness";
import { errorForLog } from "../../functions/observability/logger";
import { makeSendInitHandler } from "../../functions/ws/handlers/send-init";
import { WS_ROUTES } from "../../functions/ws/routes";
import type { WsDeps, WsEvent, WsResult } from "../../functions/ws/ws-deps";
import type { LocalClientPush } from "./local-client-push";

/** API Gateway WebSocket frames are at most 128 KB. */
const MAX_FRAME_BYTES = 128 * 1024;

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 500: "Internal Server Error" };

/** What `ws` itself requires of a handshake (RFC 6455 §4.2.1), checked before `$connect` runs, as API Gateway does. */
const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/;

export interface LocalWsServer {
  path: string;
  /** Open sockets (tests close them to simulate clients leaving). */
  sockets(): number;
  /** Resolves once every connect, frame and disconnect in progress has been handled. */
  settled(): Promise<void>;
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

/** Answers a refused upgrade with an HTTP status and closes the socket once the answer is out. */
function refuse(socket: Duplex, status: number, body: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.once("finish", () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

/** The path of an upgrade request; null when its target is not a URL at all. */
function requestUrl(req: IncomingMessage): URL | null {
  try {
    return new URL(req.url ?? "/", "http://local");
  } catch {
    return null;
  }
}

/** Why `ws` would refuse this handshake; null when it is well formed. */
function handshakeProblem(req: IncomingMessage): string | null {
  if (req.method !== "GET") return "the WebSocket handshake must be a GET";
  if (req.headers.upgrade?.toLowerCase() !== "websocket") return "invalid Upgrade header";
  if (!WEBSOCKET_KEY.test(req.headers["sec-websocket-key"] ?? "")) return "missing or invalid Sec-WebSocket-Key header";
  const version = Number(req.headers["sec-websocket-version"]);
  if (version !== 13 && version !== 8) return "missing or invalid Sec-WebSocket-Version header";
  return null;
}

/**
 * Pings in a row a peer may leave unanswered before it is dropped. More than one: a busy event
 * loop can run the next ping tick before it has read the answer to the last one.
 */
const MAX_UNANSWERED_PINGS = 2;

interface Liveness {
  /** Pings sent since the peer last answered (a pong or any frame). */
  unanswered: number;
  /** When the connection item's expiry was last pushed forward (epoch ms). */
  refreshedAt: number;
}

export function attachLocalWsServer(server: Server, deps: WsDeps, push: LocalClientPush, path = "/ws"): LocalWsServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const connect = handlerFor(deps, "$connect");
  const disconnect = handlerFor(deps, "$disconnect");
  const message = handlerFor(deps, "$default");
  // The socket is registered before init goes out: a push that finds it gone means it left, so no retries.
  const sendInit = makeSendInitHandler(deps, { attempts: 1 });
  const inFlight = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p)).catch(() => undefined);
    return p;
  };
  const liveness = new Map<WebSocket, Liveness>();
  const ttlSeconds = deps.config.CONNECTION_TTL_SECONDS;

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // First: node removed its own listener when it handed the socket over, and an `error`
    // (a reset mid-handshake) with no listener would end the process.
    socket.on("error", (err) => deps.logger.debug("local ws: socket error", { error: errorForLog(err) }));
    const url = requestUrl(req);
    if (url?.pathname !== path) {
      refuse(socket, 404, `no WebSocket route for ${url?.pathname ?? "this target"}`);
      return;
    }
    const problem = handshakeProblem(req);
    if (problem) {
      refuse(socket, 400, problem);
      return;
    }
    const connectionId = randomBytes(12).toString("base64url");
    const query = Object.fromEntries(url.searchParams.entries());
    const sessionId = query.sessionId ?? "";

    let chain: Promise<unknown> = Promise.resolve();
    const inOrder = (work: () => Promise<unknown>) => {
      chain = track(chain.then(work).catch((err: unknown) => deps.logger.error("local ws: handler failed", { connectionId, error: errorForLog(err) })));
    };
    // `$connect` registered the connection; `$disconnect` ran (or is queued) for it.
    let registered = false;
    let disconnected = false;
    let gone = false;
    // However the socket goes, and whenever (even while `$connect` still runs): `$disconnect` once.
    const onGone = () => {
      gone = true;
      push.unregister(connectionId);
      if (!registered || disconnected) return;
      disconnected = true;
      inOrder(() => disconnect(event(connectionId, "$disconnect")));
    };
    socket.once("close", onGone);

    void track(
      (async () => {
        const result = await connect(event(connectionId, "$connect", { queryStringParameters: query }));
        if (result.statusCode !== 200) {
          refuse(socket, result.statusCode, result.body ?? "");
          return;
        }
        registered = true;
        if (gone || !socket.readable || !socket.writable) {
          // The client left while `$connect` ran: its item must not outlive it.
          socket.destroy();
          onGone();
          return;
        }
        // `ws` destroys the socket when it cannot complete the upgrade: `close` runs `$disconnect`.
        wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
          push.register(
            connectionId,
            (msg) => {
              if (ws.readyState !== ws.OPEN) return false;
              ws.send(JSON.stringify(msg));
              return true;
            },
            () => ws.close(1008, "closed by the server"),
          );
          const alive: Liveness = { unanswered: 0, refreshedAt: deps.now().getTime() };
          liveness.set(ws, alive);
          // An oversized frame, a protocol violation: `ws` closes this connection (1009, 1002) and reports it here.
          ws.on("error", (err) => deps.logger.warn("local ws: connection error", { connectionId, error: errorForLog(err) }));
          ws.on("pong", () => {
            alive.unanswered = 0;
            // The client answers, so it is there: keep its item from expiring (one write per half TTL).
            const now = deps.now();
            if (now.getTime() - alive.refreshedAt < (ttlSeconds * 1000) / 2) return;
            alive.refreshedAt = now.getTime();
            inOrder(() => deps.connections.refresh(sessionId, connectionId, connectionExpiresAt(now, ttlSeconds)));
          });
          inOrder(() => sendInit({ connectionId, sessionId }));
          ws.on("message", (data, isBinary) => {
            // A frame proves the peer is there as well as a pong does.
            alive.unanswered = 0;
            const body = isBinary ? Buffer.from(data as Buffer).toString("base64") : data.toString();
            inOrder(() => message(event(connectionId, "$default", { body, isBase64Encoded: isBinary })));
          });
          ws.on("close", () => {
            liveness.delete(ws);
            onGone();
          });
        });
      })().catch((err: unknown) => {
        deps.logger.error("local ws: upgrade failed", { error: errorForLog(err) });
        socket.destroy();
      }),
    );
  };
  server.on("upgrade", onUpgrade);

  // A peer that leaves its pings unanswered is half-open (or hostile): drop it.
  const pinger = setInterval(() => {
    for (const [ws, alive] of liveness) {
      if (alive.unanswered >= MAX_UNANSWERED_PINGS) {
        ws.terminate();
        continue;
      }
      alive.unanswered++;
      ws.ping();
    }
  }, Math.round(deps.config.LOCAL_WS_PING_SECONDS * 1000));
  pinger.unref();

  const settled = async () => {
    while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
  };
  return {
    path,
    sockets: () => wss.clients.size,
    settled,
    close: async () => {
      clearInterval(pinger);
      server.off("upgrade", onUpgrade);
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await settled();
    },
  };
}
