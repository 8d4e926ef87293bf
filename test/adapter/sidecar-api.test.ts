/**
 * The sidecar API over real sockets with a real git workspace: auth (missing, wrong, right token,
 * no token configured, access tokens: valid, expired, wrong session, tampered, another key,
 * malformed, and refused without SESSION_ID), the forward_auth check, traversal attempts on every path-taking route (`..`, absolute
 * paths, a symlink inside the workspace pointing out), the git views and the 64 KB diff cap,
 * port exposure through a fake Caddy admin API, and the body limit.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import type { Sidecar } from "../../sandbox/sidecar/server";
import { call, git, makeTree, SESSION_ID, startTestSidecar, TOKEN, type TestTree } from "./sidecar-harness";

let tree: TestTree;
let sidecar: Sidecar;

beforeAll(async () => {
  tree = await makeTree();
  sidecar = await startTestSidecar(tree);
});

afterAll(async () => {
  await sidecar?.close();
  await tree?.cleanup();
});

const AUTHENTICATED_ROUTES: [string, string][] = [
  ["GET", "/auth/check"],
  ["GET", "/services"],
  ["POST", "/services"],
  ["DELETE", "/services/web"],
  ["POST", "/services/web/start"],
  ["GET", "/services/web/logs"],
  ["POST", "/expose"],
  ["GET", "/git/repos"],
  ["GET", "/git/status?repo=app"],
  ["GET", "/git/diff?repo=app"],
  ["GET", "/terminal"],
  ["GET", "/no-such-route"],
];

describe("auth", () => {
  it("answers /health without a token", async () => {
    const res = await call(sidecar, "GET", "/health", { token: null });
    expect(res).toEqual({ status: 200, body: { ok: true } });
  });

  it.each(AUTHENTICATED_ROUTES)("refuses %s %s without a token, with a wrong one, or with another scheme", async (method, path) => {
    for (const token of [null, "wrong-token", `${TOKEN}x`, TOKEN.slice(0, -1), ""]) {
      const res = await call(sidecar, method, path, { token });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { code: "unauthorized", message: expect.any(String) } });
    }
    const basic = await fetch(`${sidecar.url}${path}`, { method, headers: { authorization: `Basic ${TOKEN}` } });
    expect(basic.status).toBe(401);
    await basic.body?.cancel();
  });

  it("never accepts the token in the query string", async () => {
    const res = await call(sidecar, "GET", `/git/repos?token=${TOKEN}&access_token=${TOKEN}`, { token: null });
    expect(res.status).toBe(401);
  });

  it("lets the right token through", async () => {
    const res = await call(sidecar, "GET", "/git/repos");
    expect(res.status).toBe(200);
    const unknown = await call(sidecar, "GET", "/no-such-route");
    expect(unknown.status).toBe(404);
  });

  it("refuses everything but /health when no token is configured (secure by default)", async () => {
    const open = await startTestSidecar(tree, { token: undefined, stopServicesOnClose: false });
    try {
      expect((await call(open, "GET", "/health", { token: null })).status).toBe(200);
      for (const token of [null, "", "undefined", TOKEN]) {
        expect((await call(open, "GET", "/services", { token })).status).toBe(401);
      }
    } finally {
      await open.close();
    }
  });
});

describe("access tokens", () => {
  const nowS = () => Math.floor(Date.now() / 1000);
  const mint = (over: Partial<{ sid: string; iat: number; exp: number }> = {}, key = TOKEN) =>
    mintAccessToken(key, { sid: SESSION_ID, iat: nowS() - 5, exp: nowS() + 300, ...over });

  it("accepts a valid access token for this session on every route", async () => {
    const token = mint();
    expect((await call(sidecar, "GET", "/git/repos", { token })).status).toBe(200);
    expect((await call(sidecar, "GET", "/services", { token })).status).toBe(200);
    const check = await fetch(`${sidecar.url}/auth/check`, { headers: { authorization: `Bearer ${token}` } });
    expect(check.status).toBe(204);
    expect(await check.text()).toBe("");
  });

  const tampered = () => {
    // The signature's first character (all six bits count; the last one carries ignored padding bits).
    const [prefix, payload, sig = ""] = mint().split(".");
    return `${prefix}.${payload}.${sig.startsWith("A") ? "B" : "A"}${sig.slice(1)}`;
  };
  const forgedClaims = () => {
    const [prefix, , sig] = mint().split(".");
    return `${prefix}.${Buffer.from(JSON.stringify({ sid: SESSION_ID, iat: nowS(), exp: nowS() + 3600 })).toString("base64url")}.${sig}`;
  };

  it.each([
    ["expired", () => mint({ iat: nowS() - 600, exp: nowS() - 1 })],
    ["for another session", () => mint({ sid: "ses_other" })],
    ["with a tampered signature", tampered],
    ["with forged claims", forgedClaims],
    ["signed with another key", () => mint({}, "another-sandbox-key-0123456789")],
    ["longer-lived than the cap", () => mint({ iat: nowS(), exp: nowS() + 24 * 3600 + 60 })],
    ["malformed", () => "sca1.not-a-token"],
    ["malformed (garbage claims)", () => "sca1.e30.AAAA"],
  ])("refuses an access token %s with 401, on routes and the terminal upgrade", async (_what, make) => {
    const token = make();
    for (const [method, path] of [["GET", "/services"], ["GET", "/auth/check"], ["DELETE", "/services/web"], ["GET", "/git/repos"]] as const) {
      const res = await call(sidecar, method, path, { token });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body).toEqual({ error: { code: "unauthorized", message: expect.any(String) } });
    }
    expect(await upgradeStatus(sidecar, { authorization: `Bearer ${token}` })).toBe(401);
  });

  it("never accepts an access token in the query string", async () => {
    const token = mint();
    expect((await call(sidecar, "GET", `/auth/check?token=${token}&access_token=${token}`, { token: null })).status).toBe(401);
    expect(await upgradeStatus(sidecar, {}, `?token=${token}`)).toBe(401);
  });

  it("without SESSION_ID refuses access tokens but still takes the sandbox key", async () => {
    const noSession = await startTestSidecar(tree, { sessionId: undefined, stopServicesOnClose: false });
    try {
      expect((await call(noSession, "GET", "/auth/check", { token: mint() })).status).toBe(401);
      expect((await call(noSession, "GET", "/auth/check")).status).toBe(204);
    } finally {
      await noSession.close();
    }
  });

  it("without a configured token refuses access tokens signed with an empty key", async () => {
    const open = await startTestSidecar(tree, { token: undefined, stopServicesOnClose: false });
    try {
      const token = mintAccessToken("", { sid: SESSION_ID, iat: nowS(), exp: nowS() + 60 });
      expect((await call(open, "GET", "/auth/check", { token })).status).toBe(401);
    } finally {
      await open.close();
    }
  });
});

describe("auth check (Caddy forward_auth)", () => {
  it("answers 204 with no body to the sandbox key, 401 to anyone else", async () => {
    const ok = await fetch(`${sidecar.url}/auth/check`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(204);
    expect(await ok.text()).toBe("");
    expect((await call(sidecar, "GET", "/auth/check", { token: null })).status).toBe(401);
    expect((await call(sidecar, "POST", "/auth/check")).status).toBe(404);
  });
});

/** The HTTP status a WebSocket upgrade to /terminal gets (101 when accepted, then closed). */
async function upgradeStatus(target: Sidecar, headers: Record<string, string>, query = ""): Promise<number> {
  const { default: WebSocket } = await import("ws");
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${target.url.replace(/^http/, "ws")}/terminal${query}`, { headers });
    socket.once("open", () => {
      socket.terminate();
      resolve(101);
    });
    socket.once("unexpected-response", (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    socket.once("error", reject);
  });
}

describe("traversal", () => {
  const outsidePaths = () => [
    "..",
    "../outside",
    "app/../../outside",
    tree.outside,
    "/etc",
    "escape",
    "escape/",
    `${tree.workspace}/escape`,
  ];

  it.each(["status", "diff"])("git %s refuses every repo outside the workspace", async (view) => {
    for (const repo of outsidePaths()) {
      const res = await call(sidecar, "GET", `/git/${view}?repo=${encodeURIComponent(repo)}`);
      expect(res.status, repo).toBe(400);
      expect(res.body, repo).toEqual({ error: { code: "outside_workspace", message: expect.any(String) } });
      expect(JSON.stringify(res.body)).not.toContain("outside-secret");
    }
  });

  it("does not list a repo reached through a symlink", async () => {
    const res = await call(sidecar, "GET", "/git/repos");
    expect(res.body.repos).toEqual([{ path: "app", name: "app" }]);
  });

  it("refuses a service cwd outside the workspace", async () => {
    for (const cwd of outsidePaths()) {
      const res = await call(sidecar, "POST", "/services", { body: { name: "escapee", command: "cat secret.txt", cwd } });
      expect(res.status, cwd).toBe(400);
      expect((res.body.error as { code: string }).code, cwd).toBe("outside_workspace");
    }
    expect((await call(sidecar, "GET", "/services")).body.services).toEqual([]);
  });

  it("refuses a service name that tries to walk paths", async () => {
    const res = await call(sidecar, "POST", "/services", { body: { name: "../../etc/passwd", command: "true" } });
    expect(res.status).toBe(400);
    const start = await call(sidecar, "POST", "/services/..%2F..%2Fetc/start");
    expect(start.status).toBe(404);
  });
});

describe("git views", () => {
  it("reports status in structured porcelain v2", async () => {
    const repo = join(tree.workspace, "app");
    await writeFile(join(repo, "notes.txt"), "one\ntwo\n");
    await writeFile(join(repo, "new file.txt"), "fresh\n");
    const res = await call(sidecar, "GET", "/git/status?repo=app");
    expect(res.status).toBe(200);
    expect(res.body.branch).toMatchObject({ head: "main", oid: expect.stringMatching(/^[0-9a-f]{40}$/) });
    expect(res.body.files).toEqual(
      expect.arrayContaining([
        { path: "notes.txt", kind: "changed", index: ".", worktree: "M" },
        { path: "new file.txt", kind: "untracked", index: "?", worktree: "?" },
      ]),
    );
  });

  it("returns a small diff whole", async () => {
    const res = await call(sidecar, "GET", "/git/diff?repo=app");
    expect(res.status).toBe(200);
    expect(res.body.truncated).toBe(false);
    expect(res.body.diff).toBe(git(join(tree.workspace, "app"), "diff", "--no-color", "HEAD"));
    expect(res.body.diff).toContain("+two");
  });

  it("caps a large diff at 64 KB and says so", async () => {
    const repo = join(tree.workspace, "app");
    // Multi-byte characters make the cut land inside one unless the cap respects UTF-8.
    const line = (i: number) => `line ${i} é€😀 ${"x".repeat(60)}\n`;
    await writeFile(join(repo, "big.txt"), Array.from({ length: 3_000 }, (_, i) => line(i)).join(""));
    git(repo, "add", "big.txt");
    const full = git(repo, "diff", "--no-color", "HEAD");
    expect(Buffer.byteLength(full)).toBeGreaterThan(64 * 1024);

    const res = await call(sidecar, "GET", "/git/diff?repo=app");
    expect(res.status).toBe(200);
    const diff = res.body.diff as string;
    expect(res.body.truncated).toBe(true);
    expect(res.body.bytes).toBe(Buffer.byteLength(diff));
    expect(Buffer.byteLength(diff)).toBeLessThanOrEqual(64 * 1024);
    expect(Buffer.byteLength(diff)).toBeGreaterThan(64 * 1024 - 4);
    expect(diff).not.toContain("\uFFFD");
    expect(full.startsWith(diff)).toBe(true);
  });

  it("diffs a repo with no commit yet against the empty tree", async () => {
    const fresh = join(tree.workspace, "fresh");
    await mkdir(fresh);
    git(fresh, "init", "-q");
    await writeFile(join(fresh, "a.txt"), "alpha\n");
    git(fresh, "add", "a.txt");
    const res = await call(sidecar, "GET", "/git/diff?repo=fresh");
    expect(res.status).toBe(200);
    expect(res.body.diff).toContain("+alpha");
  });

  it("answers 400 without a repo and 404 for a directory that is not one", async () => {
    expect((await call(sidecar, "GET", "/git/status")).status).toBe(400);
    expect((await call(sidecar, "GET", "/git/status?repo=nope")).status).toBe(404);
    await mkdir(join(tree.workspace, "plain"), { recursive: true });
    expect((await call(sidecar, "GET", "/git/diff?repo=plain")).status).toBe(404);
  });
});

describe("git in a hostile repository (issue 14 §2)", () => {
  /**
   * The agent owns `.git/`: a repo whose config names an fsmonitor hook, a clean filter and a
   * post-index-change hook, each a script that dumps its environment. The sidecar process holds
   * secrets in its environment (as it did with `SIDECAR_TOKEN`); none may reach those programs.
   */
  const SECRET_ENV = { SIDECAR_TOKEN: TOKEN, ANTHROPIC_API_KEY: "sk-ant-api03-hostile-test-key-0123456789" };
  let leaks: string;
  let saved: Record<string, string | undefined>;

  beforeAll(async () => {
    saved = Object.fromEntries(Object.keys(SECRET_ENV).map((k) => [k, process.env[k]]));
    Object.assign(process.env, SECRET_ENV);
    leaks = join(tree.root, "leaks");
    await mkdir(leaks);
    const dumper = join(tree.root, "dump-env.sh");
    await writeFile(dumper, `#!/bin/sh\nenv > "${leaks}/$(basename "$0")-$$.env"\ncat\n`, { mode: 0o755 });
    const repo = join(tree.workspace, "hostile");
    await mkdir(repo);
    git(repo, "init", "-q", "-b", "main");
    await writeFile(join(repo, ".gitattributes"), "*.txt filter=evil\n");
    await writeFile(join(repo, "a.txt"), "one\n");
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "initial");
    git(repo, "config", "core.fsmonitor", dumper);
    git(repo, "config", "filter.evil.clean", dumper);
    git(repo, "config", "filter.evil.required", "true");
    git(repo, "config", "diff.external", dumper);
    await mkdir(join(repo, ".git", "hooks"), { recursive: true });
    await writeFile(join(repo, ".git", "hooks", "post-index-change"), `#!/bin/sh\nexec "${dumper}"\n`, { mode: 0o755 });
    await writeFile(join(repo, "a.txt"), "two\n");
  });

  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  async function leaked(): Promise<string> {
    const { readdir, readFile } = await import("node:fs/promises");
    const files = await readdir(leaks);
    return (await Promise.all(files.map((f) => readFile(join(leaks, f), "utf8")))).join("\n");
  }

  it("runs none of the repository's programs for status or diff, and still answers", async () => {
    const status = await call(sidecar, "GET", "/git/status?repo=hostile");
    expect(status.status).toBe(200);
    expect(status.body.files).toEqual([{ path: "a.txt", kind: "changed", index: ".", worktree: "M" }]);
    const diff = await call(sidecar, "GET", "/git/diff?repo=hostile");
    expect(diff.status).toBe(200);
    expect(diff.body.diff).toContain("+two");

    const dumped = await leaked();
    expect(dumped).not.toContain(TOKEN);
    expect(dumped).not.toContain(SECRET_ENV.ANTHROPIC_API_KEY);
    expect(dumped).toBe("");
  });
});

describe("expose", () => {
  it("answers 503 with a clear message when no Caddy admin API is configured", async () => {
    const res = await call(sidecar, "POST", "/expose", { body: { port: 3000 } });
    expect(res.status).toBe(503);
    expect((res.body.error as { message: string }).message).toMatch(/CADDY_ADMIN_URL/);
  });

  it("validates the port", async () => {
    for (const body of [{ port: 0 }, { port: 70000 }, { port: "3000" }, {}]) {
      expect((await call(sidecar, "POST", "/expose", { body })).status).toBe(400);
    }
  });

  it("inserts its route first on the preview server, then patches it", async () => {
    const caddy = await FakeCaddy.start();
    const withCaddy = await startTestSidecar(tree, { caddyAdminUrl: caddy.url, stopServicesOnClose: false });
    try {
      const first = await call(withCaddy, "POST", "/expose", { body: { port: 3000 } });
      expect(first).toEqual({ status: 200, body: { exposedPort: 3000 } });
      const insert = caddy.requests.find((r) => r.method === "PUT");
      expect(insert?.path).toBe("/config/apps/http/servers/preview/routes/0");
      expect(insert?.body).toEqual({
        "@id": "sidecar-expose",
        match: [{ not: [{ path: ["/_sandbox/sidecar/*"] }] }],
        handle: [{ handler: "reverse_proxy", upstreams: [{ dial: "127.0.0.1:3000" }] }],
      });

      const second = await call(withCaddy, "POST", "/expose", { body: { port: 5173 } });
      expect(second.status).toBe(200);
      const patch = caddy.requests.find((r) => r.method === "PATCH");
      expect(patch?.path).toBe("/id/sidecar-expose");
      expect(patch?.body).toMatchObject({ handle: [{ upstreams: [{ dial: "127.0.0.1:5173" }] }] });
      expect((await call(withCaddy, "GET", "/services")).body.exposedPort).toBe(5173);
    } finally {
      await withCaddy.close();
      await caddy.close();
    }
  });
});

describe("request limits", () => {
  it("answers 413 past 64 KB and 400 for malformed JSON", async () => {
    const big = await call(sidecar, "POST", "/services", { rawBody: JSON.stringify({ name: "big", command: "x".repeat(70 * 1024) }) });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ error: { code: "payload_too_large", message: expect.any(String) } });
    const bad = await call(sidecar, "POST", "/services", { rawBody: "{not json" });
    expect(bad.status).toBe(400);
  });
});

/** A stand-in for Caddy's admin API: two servers, routes stored by `@id`. */
class FakeCaddy {
  readonly requests: { method: string; path: string; body: unknown }[] = [];
  private readonly ids = new Set<string>();
  private readonly server: Server = createServer((req, res) => {
    void this.handle(req).then(([status, body]) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
  });

  static async start(): Promise<FakeCaddy> {
    const fake = new FakeCaddy();
    await new Promise<void>((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async handle(req: IncomingMessage): Promise<[number, unknown]> {
    let text = "";
    for await (const chunk of req) text += String(chunk);
    const body = text ? (JSON.parse(text) as { "@id"?: string }) : undefined;
    const path = req.url ?? "/";
    this.requests.push({ method: req.method ?? "", path, body });
    if (path.startsWith("/id/")) return this.ids.has(path.slice(4)) ? [200, {}] : [404, { error: "unknown object ID" }];
    if (path === "/config/apps/http/servers") return [200, { admin: { listen: [":2019"] }, preview: { listen: [":20000"] } }];
    if (req.method === "PUT" && body?.["@id"]) this.ids.add(body["@id"]);
    return [200, {}];
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
