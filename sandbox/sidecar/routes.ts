/**
 * The sidecar's HTTP routes (seed 003 §6.8, issue 7 item 3). Handlers parse their input with
 * zod and hand typed values to the service manager, the git views or the Caddy client; they
 * answer JSON, except the log stream (SSE). Auth has already been checked by the server.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { mkdir, open } from "node:fs/promises";
import { dirname } from "node:path";
import * as z from "zod";
import { whenAccessExpires, type Caller } from "./auth";
import { exposePort } from "./caddy-expose";
import { invalidRequest } from "./errors";
import { discoverRepos, gitDiff, gitStatus, resolveRepo } from "./git-repos";
import { readJsonBody, sendJson } from "./http-io";
import { LogFollower, readTail } from "./log-follower";
import type { ServiceManager } from "./service-manager";
import { ServiceDefinitionSchema } from "./service-state";

export interface RouteContext {
  workspaceDir: string;
  services: ServiceManager;
  caddyAdminUrl: string | undefined;
  /** Open SSE responses, ended when the sidecar closes. */
  streams: Set<ServerResponse>;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** Who made this request (checked by the server): an access token bounds a log stream's life. */
  caller: Caller;
  /** Epoch milliseconds (the access token's expiry is judged against it). */
  now?: () => number;
}

type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RouteContext, params: string[], url: URL) => Promise<void>;

interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
}

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || what}: ${i.message}`).join("; ");
    throw invalidRequest(issues);
  }
  return parsed.data;
}

const DefineBodySchema = ServiceDefinitionSchema.extend({
  /** Define and start in one call (the seed's `POST /api/services` started the service). */
  start: z.boolean().default(false),
});

const ExposeBodySchema = z.object({ port: z.number().int().min(1).max(65535) });

/** Caddy `forward_auth` (seed 003 §6.8): the server already checked the credential, so 204. */
const authCheck: Handler = async (_req, res) => {
  res.writeHead(204, { "cache-control": "no-store" });
  res.end();
};

const listServices: Handler = async (_req, res, ctx) => {
  sendJson(res, 200, { services: ctx.services.list(), exposedPort: ctx.services.exposedPort });
};

const defineService: Handler = async (req, res, ctx) => {
  const { start, ...def } = parse(DefineBodySchema, await readJsonBody(req), "body");
  const { created } = await ctx.services.define(def);
  const service = start ? await ctx.services.start(def.name) : ctx.services.get(def.name);
  sendJson(res, created ? 201 : 200, { service });
};

const serviceAction: Handler = async (_req, res, ctx, [name = "", action]) => {
  const service =
    action === "start" ? await ctx.services.start(name) : action === "stop" ? await ctx.services.stop(name) : await ctx.services.restart(name);
  sendJson(res, 200, { service });
};

/** Stops the service if it runs, forgets its definition, state and log; answers the removed service. */
const removeService: Handler = async (_req, res, ctx, [name = ""]) => {
  sendJson(res, 200, { service: await ctx.services.remove(name) });
};

const SSE_KEEPALIVE_MS = 15_000;

/**
 * SSE: the existing tail of the log, then each new line, until the client goes away or the access
 * token that opened the stream expires (issue 14 item 5: an `expired` event, then the end).
 */
const streamLogs: Handler = async (req, res, ctx, [name = ""]) => {
  const file = ctx.services.logFile(name);
  await mkdir(dirname(file), { recursive: true });
  await (await open(file, "a", 0o600)).close();
  const tail = await readTail(file);
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  const writeLines = (lines: string[]) => {
    if (!res.writableEnded) res.write(lines.map((l) => `data: ${l}\n\n`).join(""));
  };
  res.write(`: log ${name}\n\n`);
  writeLines(tail.lines);
  const follower = new LogFollower(file, tail.offset, writeLines, (err) =>
    ctx.log("log follow failed", { service: name, error: err instanceof Error ? err.message : String(err) }),
  );
  const keepalive = setInterval(() => res.write(": keepalive\n\n"), SSE_KEEPALIVE_MS);
  keepalive.unref();
  ctx.streams.add(res);
  const cancelExpiry = whenAccessExpires(
    ctx.caller,
    () => {
      if (!res.writableEnded) res.end("event: expired\ndata: access token expired\n\n");
    },
    ctx.now,
  );
  const cleanup = () => {
    follower.stop();
    clearInterval(keepalive);
    cancelExpiry();
    ctx.streams.delete(res);
  };
  req.on("close", cleanup);
  res.on("close", cleanup);
  follower.start();
};

const expose: Handler = async (req, res, ctx) => {
  const { port } = parse(ExposeBodySchema, await readJsonBody(req), "body");
  await exposePort(ctx.caddyAdminUrl, port);
  await ctx.services.setExposedPort(port);
  sendJson(res, 200, { exposedPort: port });
};

const listRepos: Handler = async (_req, res, ctx) => {
  sendJson(res, 200, { repos: await discoverRepos(ctx.workspaceDir) });
};

const repoStatus: Handler = async (_req, res, ctx, _params, url) => {
  const repo = url.searchParams.get("repo");
  const dir = await resolveRepo(ctx.workspaceDir, repo);
  sendJson(res, 200, { repo, ...(await gitStatus(dir)) });
};

const repoDiff: Handler = async (_req, res, ctx, _params, url) => {
  const repo = url.searchParams.get("repo");
  const dir = await resolveRepo(ctx.workspaceDir, repo);
  sendJson(res, 200, { repo, ...(await gitDiff(dir)) });
};

export const ROUTES: readonly Route[] = [
  { method: "GET", pattern: /^\/auth\/check$/, handler: authCheck },
  { method: "GET", pattern: /^\/services$/, handler: listServices },
  { method: "POST", pattern: /^\/services$/, handler: defineService },
  { method: "DELETE", pattern: /^\/services\/([^/]+)$/, handler: removeService },
  { method: "POST", pattern: /^\/services\/([^/]+)\/(start|stop|restart)$/, handler: serviceAction },
  { method: "GET", pattern: /^\/services\/([^/]+)\/logs$/, handler: streamLogs },
  { method: "POST", pattern: /^\/expose$/, handler: expose },
  { method: "GET", pattern: /^\/git\/repos$/, handler: listRepos },
  { method: "GET", pattern: /^\/git\/status$/, handler: repoStatus },
  { method: "GET", pattern: /^\/git\/diff$/, handler: repoDiff },
];

/** The handler and decoded path parameters for a request, or null (404). */
export function matchRoute(method: string, pathname: string): { handler: Handler; params: string[] } | null {
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const m = route.pattern.exec(pathname);
    if (!m) continue;
    try {
      return { handler: route.handler, params: m.slice(1).map((p) => decodeURIComponent(p ?? "")) };
    } catch {
      throw invalidRequest("malformed percent-encoding in the path");
    }
  }
  return null;
}
