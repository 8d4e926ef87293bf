/**
 * The sidecar's in-sandbox-only listener (issue 23): a Unix domain socket at `SIDECAR_SOCKET`,
 * mode 0600, serving the credential broker's two routes and nothing else. There is no auth
 * header: the file's permissions are the auth. The public tunnel reaches only the TCP port
 * (through Caddy), never this socket, and the TCP server does not serve these routes.
 *
 *   POST /git/credential {protocol, host, path?} -> 200 {username, password}
 *                                                 | 404 no_credential | 503 (names why)
 *   GET  /env/values                              -> 200 {values}     | 503
 *
 * and the agent's own tools (issue 25 §4, agent-tools.ts), called by OpenCode's tool files:
 *   POST /agent/save-snapshot {message?}          -> 200 {status, execution, snapshotId, message}
 *   POST /agent/service-commands {commands}       -> 200 the control plane's answer
 *   POST /agent/env-files {files}                 -> 200 the control plane's answer
 *   POST /agent/env-request {keys, reason?}       -> 200 the control plane's answer
 *   POST /agent/verify {folder?, summary?}        -> 200 {verification, report}
 *   (400 naming the field; the control plane's 4xx relayed; 503 when it cannot be reached)
 *
 * Called by the in-sandbox CLI: `git-credential get` (git's credential helper) and `env apply`.
 * Logs carry route, host, path and status only: never a password or a value.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { chmod, lstat, rename, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import * as z from "zod";
import {
  RequestEnvVariablesRequest,
  SaveEnvFilesRequest,
  SaveServiceCommandsRequest,
  SaveSnapshotRequest,
  VerifyRequest,
  describeRequestIssue,
} from "../shared/agent-tool-requests";
import type { AgentTools } from "./agent-tools";
import { credentialCacheKey, type CredentialBroker } from "./credential-broker";
import { invalidRequest, SidecarError } from "./errors";
import { readJsonBody, sendError, sendJson } from "./http-io";

export const SOCKET_MODE = 0o600;

/** What git sends a credential helper, as the CLI forwards it (https://git-scm.com/docs/git-credential). */
const GitCredentialBodySchema = z.object({
  protocol: z.enum(["http", "https"]),
  /** Host, with `:port` when the URL has one; no whitespace or slash (a line-based protocol). */
  host: z.string().min(1).max(255).regex(/^[^\s/]+$/, "host must not contain whitespace or '/'"),
  /** Only sent when git's `credential.useHttpPath` is on. */
  path: z
    .string()
    .max(2048)
    .regex(/^[^\0\r\n]*$/, "path must be one line")
    .optional(),
});

export interface SocketApiOptions {
  socketPath: string;
  broker: CredentialBroker;
  /** The agent's tools; undefined: their routes answer 404. */
  agentTools?: AgentTools;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

export interface SocketApi {
  path: string;
  close(): Promise<void>;
}

/** A socket left behind by a sidecar that died is replaced; anything else at the path is not ours to delete. */
async function removeStaleSocket(path: string): Promise<void> {
  const existing = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return null;
    throw err;
  });
  if (!existing) return;
  if (!existing.isSocket()) throw new Error(`SIDECAR_SOCKET ${path} exists and is not a socket`);
  await rm(path, { force: true });
}

export async function startSocketApi(options: SocketApiOptions): Promise<SocketApi> {
  const { socketPath, broker, agentTools, log } = options;

  /** One agent-tool route: the body checked against the tool's request schema, then forwarded. */
  const agentTool =
    <T>(schema: z.ZodType<T>, name: string, run: (tools: AgentTools, request: T) => Promise<unknown>) =>
    async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
      if (!agentTools) throw new SidecarError(404, "not_found", "the agent's tools are not configured in this sidecar");
      const parsed = schema.safeParse(await readJsonBody(req));
      if (!parsed.success) throw invalidRequest(describeRequestIssue(parsed.error));
      const answer = await run(agentTools, parsed.data);
      log("agent tool", { tool: name });
      sendJson(res, 200, answer);
    };
  const agentRoutes: Record<string, (req: IncomingMessage, res: ServerResponse) => Promise<void>> = {
    "/agent/save-snapshot": agentTool(SaveSnapshotRequest, "save_snapshot", (t, r) => t.saveSnapshot(r)),
    "/agent/service-commands": agentTool(SaveServiceCommandsRequest, "save_service_commands", (t, r) => t.saveServiceCommands(r)),
    "/agent/env-files": agentTool(SaveEnvFilesRequest, "save_env_files", (t, r) => t.saveEnvFiles(r)),
    "/agent/env-request": agentTool(RequestEnvVariablesRequest, "request_env_variables", (t, r) => t.requestEnvVariables(r)),
    "/agent/verify": agentTool(VerifyRequest, "verify", (t, r) => t.verify(r)),
  };

  const gitCredential = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const parsed = GitCredentialBodySchema.safeParse(await readJsonBody(req));
    if (!parsed.success) throw invalidRequest(parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "));
    const request = parsed.data;
    const { credential, cached } = await broker.gitCredential(request);
    log("git credential", { protocol: request.protocol, host: request.host, path: request.path ?? null, found: credential !== null, cached });
    if (!credential) throw new SidecarError(404, "no_credential", `no credential for ${credentialCacheKey(request)}`);
    sendJson(res, 200, { username: credential.username, password: credential.password });
  };

  const envValues = async (_req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const values = await broker.envValues();
    log("env values", { count: Object.keys(values).length });
    sendJson(res, 200, { values });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    if (url.pathname === "/git/credential" && req.method === "POST") return gitCredential(req, res);
    if (url.pathname === "/env/values" && req.method === "GET") return envValues(req, res);
    const tool = Object.hasOwn(agentRoutes, url.pathname) ? agentRoutes[url.pathname] : undefined;
    if (tool && req.method === "POST") return tool(req, res);
    throw new SidecarError(404, "not_found", `no route ${req.method ?? ""} ${url.pathname}`);
  };

  // The socket is bound under a private name, made 0600, then renamed to `socketPath`: a client
  // (git's credential helper, called by the boot's clone right after the sidecar starts) finds
  // no file (ENOENT, which it retries) until the socket is ready, never a socket that resets its
  // connection. Connections to the private name before the chmod are refused: until then that
  // socket has the umask's mode, and only a 0600 socket is authenticated.
  let ready = false;
  const server = createServer((req, res) => {
    res.setHeader("cache-control", "no-store");
    const url = new URL(req.url ?? "/", "http://sidecar.sock");
    handle(req, res, url).catch((err: unknown) => {
      if (err instanceof SidecarError) {
        sendError(res, err.status, err.code, err.message);
        return;
      }
      const requestId = randomUUID();
      log("socket request failed", { requestId, method: req.method, path: url.pathname, error: err instanceof Error ? err.name : "unknown" });
      sendError(res, 500, "internal", "internal error", { requestId });
    });
  });
  server.on("connection", (socket: Socket) => {
    if (!ready) socket.destroy();
  });

  await removeStaleSocket(socketPath);
  // Short: a Unix socket path has room for about 100 bytes, and this one must fit as well.
  const bindPath = `${socketPath}.${randomBytes(3).toString("hex")}`;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(bindPath, () => {
      server.off("error", reject);
      resolve();
    });
  });
  let ino: number;
  try {
    await chmod(bindPath, SOCKET_MODE);
    ino = (await lstat(bindPath)).ino;
    // Before the rename: a client may connect the moment the name appears, before this continues.
    ready = true;
    await rename(bindPath, socketPath);
  } catch (err) {
    server.close();
    await rm(bindPath, { force: true });
    throw err;
  }

  return {
    path: socketPath,
    close: async () => {
      broker.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      // libuv unlinks the name it bound (gone since the rename); the socket at `socketPath` goes
      // when it is still ours (one a newer sidecar put there meanwhile is left alone).
      const left = await lstat(socketPath).catch(() => null);
      if (left?.isSocket() && left.ino === ino) await rm(socketPath, { force: true });
    },
  };
}
