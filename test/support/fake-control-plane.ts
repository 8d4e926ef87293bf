/**
 * The control plane's two sandbox routes as a local HTTP server on 127.0.0.1 (issue 23 tests):
 * `POST /v1/sandbox/git-credential` and `POST /v1/sandbox/env-values`. Every call is recorded
 * as it arrived (path, Authorization header, parsed body); the answers are set by the test.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface ControlPlaneCall {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: unknown;
}

export interface CannedAnswer {
  status: number;
  body?: unknown;
}

export interface FakeControlPlane {
  url: string;
  calls: ControlPlaneCall[];
  /** What `POST /v1/sandbox/git-credential` answers for a request body. */
  gitCredential: (body: Record<string, unknown>) => CannedAnswer;
  /** What `POST /v1/sandbox/env-values` answers. */
  envValues: () => CannedAnswer;
  /** Any other route (the agent tools' routes); null: 404. */
  other: (method: string, path: string, body: unknown) => CannedAnswer | null;
  close(): Promise<void>;
}

export function credentialAnswer(password: string, expiresAt: number, username = "x-access-token"): CannedAnswer {
  return { status: 200, body: { credential: { username, password, expiresAt: new Date(expiresAt).toISOString() } } };
}

export async function startFakeControlPlane(): Promise<FakeControlPlane> {
  const fake: FakeControlPlane = {
    url: "",
    calls: [],
    gitCredential: () => ({ status: 404, body: { error: { code: "not_found", message: "no credential" } } }),
    envValues: () => ({ status: 200, body: { values: {} } }),
    other: () => null,
    close: async () => undefined,
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // recorded as text
      }
      fake.calls.push({ method: req.method ?? "", path: req.url ?? "", authorization: req.headers.authorization, contentType: req.headers["content-type"], body });
      const answer =
        req.method === "POST" && req.url === "/v1/sandbox/git-credential"
          ? fake.gitCredential(body as Record<string, unknown>)
          : req.method === "POST" && req.url === "/v1/sandbox/env-values"
            ? fake.envValues()
            : (fake.other(req.method ?? "", req.url ?? "", body) ?? { status: 404, body: { error: { code: "not_found", message: "no route" } } });
      const payload = answer.body === undefined ? "" : typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(payload);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return fake;
}
