/**
 * The in-sandbox sidecar API (seed 003 §6.8-6.10, issue 7 item 3): services, port exposure,
 * git views and a PTY terminal, on port 4000. `/health` is open; every other route, and the
 * terminal upgrade, needs `Authorization: Bearer <credential>`: the sandbox key (`SIDECAR_TOKEN`)
 * or an access token for this session signed with it (auth.ts); no configured token refuses
 * everything (secure by default). Started by `main.ts` in the sandbox and in-process by tests.
 * Steps: open the service manager (adopt/restore from the state dir), load SERVICES_FILE
 * definitions, listen, route; `close()` ends streams and terminals but leaves services running.
 *
 * With `SIDECAR_SOCKET` it also listens on that Unix socket (mode 0600, no auth header) as the
 * sandbox's credential broker (issue 23, socket-api.ts): git credentials and env values from the
 * control plane. Those routes exist only there, never on the TCP port the tunnel reaches.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { WebSocketServer } from "ws";
import * as z from "zod";
import { authenticate, protocolCredential, TERMINAL_PROTOCOL, whenAccessExpires, type AuthConfig } from "./auth";
import { ControlPlaneClient } from "./control-plane-client";
import { AgentTools } from "./agent-tools";
import { CredentialBroker } from "./credential-broker";
import { SidecarError, unauthorized } from "./errors";
import { sendError, sendJson } from "./http-io";
import { matchRoute, type RouteContext } from "./routes";
import { ServiceManager } from "./service-manager";
import { ServiceDefinitionSchema } from "./service-state";
import { startSocketApi, type SocketApi } from "./socket-api";
import { redactKnown, redactValue } from "../shared/redact-secrets";
import { attachTerminal, type TerminalSession } from "./terminal";

export interface SidecarOptions {
  port?: number;
  host?: string;
  /** The sandbox key (bearer token); undefined means every authenticated route answers 401. */
  token: string | undefined;
  /** `SESSION_ID`: access tokens must name it; undefined refuses access tokens (the key still works). */
  sessionId?: string;
  workspaceDir: string;
  stateDir: string;
  caddyAdminUrl?: string;
  /** JSON file of `[{name, command, cwd?}]` defined at start (not started). */
  servicesFile?: string;
  /** `SIDECAR_SOCKET`: the in-sandbox-only listener (credential broker); undefined: none. */
  socketPath?: string;
  /** `CONTROL_PLANE_URL`: where the broker asks; undefined: its routes answer 503. */
  controlPlaneUrl?: string;
  /** The broker's fetch (tests); default the global `fetch`. */
  controlPlaneFetch?: typeof fetch;
  /** How long the agent's `save_snapshot` waits for the commit (tests); default agent-tools.ts `SNAPSHOT_WAIT_MS`. */
  agentSnapshotWaitMs?: number;
  /** Shell argv for the terminal; default `bash -l`. */
  terminalCommand?: string[];
  /** Stop every service on close (tests); in a sandbox services outlive a sidecar restart. */
  stopServicesOnClose?: boolean;
  stopGraceMs?: number;
  /** Epoch milliseconds for access-token expiry and the credential cache (tests); default `Date.now`. */
  now?: () => number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export interface Sidecar {
  url: string;
  port: number;
  /** The Unix socket's path, when `socketPath` was given. */
  socketPath?: string;
  close(): Promise<void>;
}

type SidecarLog = NonNullable<SidecarOptions["log"]>;

/** One JSON line per event on stdout; callers never pass the token or headers in `fields`. */
export function jsonLineLog(message: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ time: new Date().toISOString(), service: "sidecar", message, ...fields }));
}

/**
 * Every log line of the sidecar, whatever its sink, loses the sandbox key (exactly) and anything
 * secret-shaped (sandbox/shared/redact-secrets.ts): fields carry error texts, hosts and paths
 * the agent or a control plane answer chose.
 */
export function redactingLog(sink: SidecarLog, known: readonly (string | undefined)[]): SidecarLog {
  const scrub = (value: unknown): unknown => {
    const redacted = redactValue(value);
    return JSON.parse(JSON.stringify(redacted ?? null, (_k, v: unknown) => (typeof v === "string" ? redactKnown(v, known) : v))) as unknown;
  };
  return (message, fields) => sink(redactKnown(message, known), fields === undefined ? undefined : (scrub(fields) as Record<string, unknown>));
}

async function loadServicesFile(services: ServiceManager, file: string, log: NonNullable<SidecarOptions["log"]>): Promise<void> {
  const parsed = z.array(ServiceDefinitionSchema).safeParse(JSON.parse(await readFile(file, "utf8")));
  if (!parsed.success) throw new Error(`SERVICES_FILE ${file}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  for (const def of parsed.data) {
    try {
      await services.define(def);
    } catch (err) {
      // A running service with another definition keeps running; the file wins on its next restart.
      log("service definition skipped", { service: def.name, error: err instanceof Error ? err.message : String(err) });
    }
  }
}

function rejectUpgrade(socket: Socket, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message } });
  const reason = status === 401 ? "Unauthorized" : status === 404 ? "Not Found" : "Bad Request";
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Environment for services: the sidecar's own, minus its credential (services run repo code). */
function serviceEnv(): NodeJS.ProcessEnv {
  const { SIDECAR_TOKEN: _token, ...rest } = process.env;
  return rest;
}

export async function startSidecar(options: SidecarOptions): Promise<Sidecar> {
  const log = redactingLog(options.log ?? jsonLineLog, [options.token]);
  const services = await ServiceManager.open({
    workspaceDir: options.workspaceDir,
    stateDir: options.stateDir,
    env: serviceEnv(),
    stopGraceMs: options.stopGraceMs,
    log,
  });
  if (options.servicesFile) await loadServicesFile(services, options.servicesFile, log);
  if (!options.token) log("SIDECAR_TOKEN is not set: every route but /health answers 401");
  else if (!options.sessionId) log("SESSION_ID is not set: access tokens are refused, only the sandbox key opens the API");
  const auth: AuthConfig = { token: options.token, sessionId: options.sessionId, now: options.now };

  const ctx: Omit<RouteContext, "caller"> = { workspaceDir: options.workspaceDir, services, caddyAdminUrl: options.caddyAdminUrl, streams: new Set(), log, now: options.now };
  const terminals = new Set<TerminalSession>();
  let sidecarUrl = "";

  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    if (url.pathname === "/health" && req.method === "GET") {
      sendJson(res, 200, { ok: true });
      return;
    }
    // Auth before routing: an unauthenticated caller learns nothing about which routes exist.
    const caller = authenticate(req.headers.authorization, auth);
    if (!caller) throw unauthorized();
    if (url.pathname === "/terminal") throw new SidecarError(400, "upgrade_required", "GET /terminal is a WebSocket upgrade");
    const route = matchRoute(req.method ?? "GET", url.pathname);
    if (!route) throw new SidecarError(404, "not_found", `no route ${req.method ?? ""} ${url.pathname}`);
    await route.handler(req, res, { ...ctx, caller }, route.params, url);
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://sidecar");
    handle(req, res, url).catch((err: unknown) => {
      if (err instanceof SidecarError) {
        sendError(res, err.status, err.code, err.message);
        return;
      }
      const requestId = randomUUID();
      // Path only: a query string is client input and could carry anything.
      log("request failed", { requestId, method: req.method, path: url.pathname, error: err instanceof Error ? err.message : String(err) });
      sendError(res, 500, "internal", "internal error", { requestId });
    });
  });

  // Selects only `sidecar.terminal`: a `bearer.<token>` offer is never echoed back.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, handleProtocols: (offers) => (offers.has(TERMINAL_PROTOCOL) ? TERMINAL_PROTOCOL : false) });
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://sidecar");
    // Header auth only: a `?token=` would end up in proxy and browser logs (seed 003 §6.9). A browser
    // (the web console) offers it as a subprotocol instead, since it cannot set Authorization.
    const caller = authenticate(req.headers.authorization ?? protocolCredential(req.headers["sec-websocket-protocol"]), auth);
    if (!caller) return rejectUpgrade(socket, 401, "unauthorized", "a valid bearer token is required");
    if (url.pathname !== "/terminal") return rejectUpgrade(socket, 404, "not_found", `no WebSocket route ${url.pathname}`);
    wss.handleUpgrade(req, socket, head, (ws) => {
      const session = attachTerminal(ws, {
        cwd: options.workspaceDir,
        command: options.terminalCommand ?? ["bash", "-l"],
        // The in-sandbox CLI works from the credential the terminal's user presented, never more:
        // a user's access token stays an access token (the sandbox key is not handed out).
        env: { ...process.env, SIDECAR_URL: sidecarUrl, SIDECAR_TOKEN: caller.credential },
      });
      terminals.add(session);
      // Issue 14 item 5: the shell lives no longer than the access token that opened it.
      const cancelExpiry = whenAccessExpires(caller, () => session.expire(), options.now);
      ws.on("close", () => {
        cancelExpiry();
        terminals.delete(session);
      });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 4000, options.host ?? "0.0.0.0", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  sidecarUrl = `http://127.0.0.1:${port}`;

  let socketApi: SocketApi | undefined;
  if (options.socketPath) {
    if (!options.controlPlaneUrl) log("CONTROL_PLANE_URL is not set: git credentials and env values answer 503");
    const now = options.now ?? Date.now;
    const client = new ControlPlaneClient({
      url: options.controlPlaneUrl,
      sandboxKey: options.token,
      sessionId: options.sessionId,
      fetch: options.controlPlaneFetch,
      now,
      log,
    });
    try {
      socketApi = await startSocketApi({
        socketPath: options.socketPath,
        broker: new CredentialBroker(client, now),
        agentTools: new AgentTools(client, {
          now,
          workspaceDir: options.workspaceDir,
          services: () => services.list(),
          ...(options.agentSnapshotWaitMs === undefined ? {} : { snapshotWaitMs: options.agentSnapshotWaitMs }),
        }),
        log,
      });
    } catch (err) {
      server.close();
      await services.close({ stopServices: options.stopServicesOnClose });
      throw err;
    }
  }

  return {
    url: sidecarUrl,
    port,
    socketPath: socketApi?.path,
    close: async () => {
      await socketApi?.close();
      for (const t of terminals) t.close();
      for (const res of ctx.streams) res.end();
      wss.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await services.close({ stopServices: options.stopServicesOnClose });
    },
  };
}
