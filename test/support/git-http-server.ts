/**
 * A git smart-HTTP server for tests (issue 23): serves the bare repositories under `root` on
 * loopback by running `git http-backend` as a CGI per request, and demands HTTP basic auth with
 * one username and password on every request (401 + `WWW-Authenticate: Basic realm="git"`
 * otherwise, which is what makes git ask its credential helper). Clone (upload-pack) and push
 * (receive-pack: enabled by http-backend because `REMOTE_USER` is set) both work.
 * `requests` records every request with whether it carried an Authorization header and whether
 * that header was right. The backend is isolated from the host's git config.
 */
import { spawn } from "node:child_process";
import { timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface GitHttpRequest {
  method: string;
  /** Path and query, e.g. `/repo.git/info/refs?service=git-upload-pack`. */
  path: string;
  authorizationHeaderPresent: boolean;
  authorized: boolean;
}

export interface GitHttpServer {
  /** `http://127.0.0.1:<port>`; a repository `root/repo.git` is `<url>/repo.git`. */
  url: string;
  requests: GitHttpRequest[];
  /** http-backend's stderr, for a failing test's message. */
  backendErrors: string[];
  close(): Promise<void>;
}

function basicAuthMatches(header: string | undefined, username: string, password: string): boolean {
  const match = /^Basic\s+(\S+)$/i.exec(header ?? "");
  if (!match?.[1]) return false;
  const presented = Buffer.from(match[1], "base64");
  const expected = Buffer.from(`${username}:${password}`, "utf8");
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}

/** Splits CGI output into its header block and the body that follows (null until the blank line arrives). */
function splitCgiHeaders(buffer: Buffer): { headers: [string, string][]; status: number; body: Buffer } | null {
  let end = buffer.indexOf("\r\n\r\n");
  let sep = 4;
  const lf = buffer.indexOf("\n\n");
  if (lf >= 0 && (end < 0 || lf < end)) {
    end = lf;
    sep = 2;
  }
  if (end < 0) return null;
  let status = 200;
  const headers: [string, string][] = [];
  for (const line of buffer.subarray(0, end).toString("latin1").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") status = Number.parseInt(value, 10) || 500;
    else headers.push([name, value]);
  }
  return { headers, status, body: buffer.subarray(end + sep) };
}

export async function startGitHttpServer(opts: { root: string; username: string; password: string }): Promise<GitHttpServer> {
  const requests: GitHttpRequest[] = [];
  const backendErrors: string[] = [];

  const backend = (req: IncomingMessage, res: ServerResponse, url: URL): void => {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: opts.root,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_PROJECT_ROOT: opts.root,
      GIT_HTTP_EXPORT_ALL: "1",
      GATEWAY_INTERFACE: "CGI/1.1",
      SERVER_PROTOCOL: "HTTP/1.1",
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.replace(/^\?/, ""),
      REMOTE_ADDR: "127.0.0.1",
      // Set only for an authenticated request; http-backend then allows receive-pack (push).
      REMOTE_USER: opts.username,
    };
    if (req.headers["content-type"]) env.CONTENT_TYPE = req.headers["content-type"];
    if (req.headers["content-length"]) env.CONTENT_LENGTH = req.headers["content-length"];
    if (req.headers["content-encoding"]) env.HTTP_CONTENT_ENCODING = req.headers["content-encoding"];
    const protocol = req.headers["git-protocol"];
    if (typeof protocol === "string") env.GIT_PROTOCOL = protocol;

    const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] });
    child.stderr.on("data", (d: Buffer) => backendErrors.push(d.toString()));
    child.stdin.on("error", () => undefined);
    req.pipe(child.stdin);

    let head: Buffer = Buffer.alloc(0);
    let started = false;
    child.stdout.on("data", (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const split = splitCgiHeaders(head);
      if (!split) return;
      started = true;
      res.writeHead(split.status, split.headers);
      if (split.body.length > 0) res.write(split.body);
    });
    child.on("error", (err) => backendErrors.push(String(err)));
    child.on("close", (code) => {
      if (!started && !res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain" });
        res.end(`git http-backend exited ${code} without an answer\n`);
        return;
      }
      res.end();
    });
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://git.test");
    const header = req.headers.authorization;
    const authorized = basicAuthMatches(header, opts.username, opts.password);
    requests.push({ method: req.method ?? "GET", path: `${url.pathname}${url.search}`, authorizationHeaderPresent: header !== undefined, authorized });
    if (!authorized) {
      req.resume();
      res.writeHead(401, { "www-authenticate": 'Basic realm="git"', "content-type": "text/plain" });
      res.end("authentication required\n");
      return;
    }
    backend(req, res, url);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    backendErrors,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
