/**
 * The local HTTP API: a node:http server that plays API Gateway's part (routing, payload
 * limit, event building) in front of the route table's handlers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { HttpDeps, HttpHandler } from "../../functions/http/http-handler";
import { HTTP_ROUTES, matchRoutePath } from "../../functions/http/routes";
import { buildHttpApiEvent, buildLambdaContext } from "./api-gateway-events";

/** API Gateway's own request payload limit; handlers apply the (smaller) API limit themselves. */
const GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > GATEWAY_MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export interface LocalHttpServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

/**
 * `deps` may be a function: the server listens first and builds its handlers on the first request,
 * so a runtime can derive its configuration from the port it got (PORT=0) before composing.
 */
/** A route served beside the route table's (Slack's, functions/slack/routes.ts). */
export interface LocalExtraRoute {
  route: { id: string; method: string; path: string };
  handler: HttpHandler;
}

export async function startLocalHttpServer(deps: HttpDeps | (() => HttpDeps), port: number, host = "127.0.0.1", extra: () => LocalExtraRoute[] = () => []): Promise<LocalHttpServer> {
  let built: LocalExtraRoute[] | undefined;
  const routeHandlers = () => (built ??= [...HTTP_ROUTES.map((route) => ({ route, handler: route.make(typeof deps === "function" ? deps() : deps) as HttpHandler })), ...extra()]);

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? "/", "http://local");
      const candidates = routeHandlers()
        .map((h) => ({ ...h, params: matchRoutePath(h.route.path, url.pathname) }))
        .filter((h) => h.params !== null);
      const match = candidates.find((h) => h.route.method === req.method);
      if (!match) {
        req.resume();
        sendJson(res, 404, { error: { code: "route_not_found", message: `no route for ${req.method} ${url.pathname}` } });
        return;
      }
      const body = await readBody(req);
      if (body === null) {
        sendJson(res, 413, { error: { code: "payload_too_large", message: "request body over the gateway limit" } });
        return;
      }
      const event = buildHttpApiEvent(
        { method: req.method ?? "GET", url: req.url ?? "/", headers: req.headers, body, sourceIp: req.socket.remoteAddress ?? "127.0.0.1" },
        `${match.route.method} ${match.route.path}`,
        match.params ?? undefined,
      );
      const result = await match.handler(event, buildLambdaContext(match.route.id, event.requestContext.requestId));
      res.writeHead(result.statusCode ?? 200, (result.headers ?? {}) as Record<string, string>);
      res.end(result.isBase64Encoded && result.body ? Buffer.from(result.body, "base64") : result.body ?? "");
    })().catch((err: unknown) => {
      console.error("local http server: unhandled error", err instanceof Error ? err.message : err);
      if (!res.headersSent) sendJson(res, 500, { error: { code: "internal_error", message: "internal error" } });
      else res.end();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
