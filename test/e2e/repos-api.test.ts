/**
 * /v1/repos and /v1/prebuilds over the local runtime (API.md "Repositories and prebuilds"):
 * validation answers 400 naming the field and stores nothing, another org's repositories and
 * prebuilds are unknown (404), and sessions name repos by id and prebuilds by id. No sandbox
 * starts here (builds of repos that name a credential: test/e2e/prebuild-credentials.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { DEV_PRINCIPAL } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, type ApiClient, type ApiResponse } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let otherOrg: string;
let member: string;

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ env: { PREBUILD_REBUILD_INTERVAL_SECONDS: "0" } }));
  otherOrg = await runtime.addApiToken({ userId: "eve", orgId: "org-other", role: "admin" });
  member = await runtime.addApiToken({ userId: "bob", orgId: DEV_PRINCIPAL.orgId });
  expect((await api.request("PUT", "/v1/secrets/GITHUB_TOKEN", { body: { value: "ghp_x" } })).status).toBe(200);
});
afterAll(async () => runtime.close());

function message(res: ApiResponse): string {
  return (res.body as { error: { message: string } }).error.message;
}

async function createRepo(body: Record<string, unknown>, token?: string): Promise<string> {
  const res = await api.request("POST", "/v1/repos", { body, ...(token ? { token } : {}) });
  expect(res.status, res.text).toBe(201);
  return (res.body as { repo: { id: string } }).repo.id;
}

describe("repositories: validation names the field and stores nothing", () => {
  const cases: { name: string; body: unknown; field: string; mentions?: string }[] = [
    { name: "no url", body: {}, field: "body.url" },
    { name: "a url with a password", body: { url: "https://u:p@github.com/a/b.git" }, field: "body.url", mentions: "credentials" },
    { name: "an unknown credential", body: { url: "https://github.com/a/b.git", credential: "NOPE" }, field: "body.credential", mentions: 'no secret named "NOPE"' },
    { name: "a credential on an ssh url", body: { url: "git@github.com:a/b.git", credential: "GITHUB_TOKEN" }, field: "body.credential", mentions: "http(s)" },
    { name: "duplicate service names", body: { url: "https://github.com/a/b.git", serviceCommands: [{ name: "web", command: "a" }, { name: "web", command: "b" }] }, field: "body.serviceCommands", mentions: "unique" },
    { name: "an empty setup command", body: { url: "https://github.com/a/b.git", setupCommands: [""] }, field: "body.setupCommands.0" },
    { name: "an unknown field", body: { url: "https://github.com/a/b.git", token: "x" }, field: "body", mentions: '"token"' },
    { name: "a branch with whitespace", body: { url: "https://github.com/a/b.git", defaultBranch: "a b" }, field: "body.defaultBranch" },
  ];
  for (const c of cases) {
    it(`${c.name}: 400 naming ${c.field}`, async () => {
      const before = (await api.request("GET", "/v1/repos")).body as { items: unknown[] };
      const res = await api.request("POST", "/v1/repos", { body: c.body });
      expect(res.status, res.text).toBe(400);
      expect(message(res).startsWith(`${c.field}:`), message(res)).toBe(true);
      if (c.mentions) expect(message(res)).toContain(c.mentions);
      expect(((await api.request("GET", "/v1/repos")).body as { items: unknown[] }).items).toHaveLength(before.items.length);
    });
  }

  it("a malformed id is a 400 naming id; an unknown one a 404", async () => {
    const bad = await api.request("GET", "/v1/repos/nope");
    expect(bad.status).toBe(400);
    expect(message(bad)).toMatch(/^id: /);
    expect((await api.request("GET", "/v1/repos/repo_0000000000000000000000000a")).status).toBe(404);
  });
});

describe("repositories: CRUD and org isolation", () => {
  it("create, read, patch (null clears), list; any role", async () => {
    const id = await createRepo({ url: "https://github.com/acme/app.git", defaultBranch: "main", credential: "GITHUB_TOKEN", setupCommands: ["npm ci"] }, member);
    const got = (await api.request("GET", `/v1/repos/${id}`)).body as { repo: Record<string, unknown> };
    expect(got.repo).toMatchObject({ id, url: "https://github.com/acme/app.git", defaultBranch: "main", credential: "GITHUB_TOKEN", setupCommands: ["npm ci"], serviceCommands: [], snapshot: null, latestBuild: null });
    expect(got.repo).not.toHaveProperty("orgId");
    const patched = await api.request("PATCH", `/v1/repos/${id}`, { body: { defaultBranch: null, serviceCommands: [{ name: "web", command: "npm run dev" }] } });
    expect(patched.status, patched.text).toBe(200);
    expect((patched.body as { repo: Record<string, unknown> }).repo).toMatchObject({ defaultBranch: null, serviceCommands: [{ name: "web", command: "npm run dev" }], credential: "GITHUB_TOKEN" });
    const toSsh = await api.request("PATCH", `/v1/repos/${id}`, { body: { url: "git@github.com:acme/app.git" } });
    expect(toSsh.status).toBe(400);
    expect(message(toSsh)).toMatch(/^body\.url: only http\(s\)/);
    const list = (await api.request("GET", "/v1/repos")).body as { items: { id: string }[] };
    expect(list.items.map((r) => r.id)).toContain(id);
  });

  it("another org's repository is unknown: 404 on get, patch, delete and refresh; never listed", async () => {
    const theirs = await createRepo({ url: "https://github.com/other/secret.git" }, otherOrg);
    for (const [method, path, body] of [
      ["GET", `/v1/repos/${theirs}`, undefined],
      ["PATCH", `/v1/repos/${theirs}`, { defaultBranch: "x" }],
      ["DELETE", `/v1/repos/${theirs}`, undefined],
      ["POST", `/v1/repos/${theirs}/refresh`, undefined],
    ] as const) {
      const res = await api.request(method, path, body ? { body } : {});
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    const list = (await api.request("GET", "/v1/repos")).body as { items: { id: string }[] };
    expect(list.items.map((r) => r.id)).not.toContain(theirs);
    // Still there for its owner.
    expect((await api.request("GET", `/v1/repos/${theirs}`, { token: otherOrg })).status).toBe(200);
  });
});

describe("prebuilds: validation and org isolation", () => {
  let repoId: string;
  let theirRepo: string;
  beforeAll(async () => {
    repoId = await createRepo({ url: "https://github.com/acme/web.git" });
    theirRepo = await createRepo({ url: "https://github.com/other/web.git" }, otherOrg);
  });

  it("400s naming the field", async () => {
    const cases: [unknown, string][] = [
      [{ repos: [{ repoId }] }, "body.name"],
      [{ name: "x", repos: [] }, "body.repos"],
      [{ name: "x", repos: [{ repoId: "repo_0000000000000000000000000a" }] }, "body.repos.0.repoId"],
      [{ name: "x", repos: [{ repoId: theirRepo }] }, "body.repos.0.repoId"],
      [{ name: "x", repos: [{ repoId }, { repoId }] }, "body.repos.1.repoId"],
      [{ name: "x", repos: [{ repoId, workspacePath: "../out" }] }, "body.repos.0.workspacePath"],
      [{ name: "x", repos: [{ repoId }], provider: "modal" }, "body.provider"],
    ];
    for (const [body, field] of cases) {
      const res = await api.request("POST", "/v1/prebuilds", { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(message(res).startsWith(`${field}:`), message(res)).toBe(true);
    }
    expect(((await api.request("GET", "/v1/prebuilds")).body as { items: unknown[] }).items).toHaveLength(0);
  });

  it("201 with snapshot null; another org's prebuild is a 404 everywhere", async () => {
    const res = await api.request("POST", "/v1/prebuilds", { body: { name: "web", repos: [{ repoId }] } });
    expect(res.status, res.text).toBe(201);
    const prebuild = (res.body as { prebuild: { id: string; snapshot: unknown; latestBuild: unknown; provider: string } }).prebuild;
    expect(prebuild).toMatchObject({ snapshot: null, latestBuild: null, provider: "local" });
    for (const [method, path] of [
      ["GET", `/v1/prebuilds/${prebuild.id}`],
      ["DELETE", `/v1/prebuilds/${prebuild.id}`],
      ["POST", `/v1/prebuilds/${prebuild.id}/builds`],
      ["GET", `/v1/prebuilds/${prebuild.id}/builds`],
    ] as const) {
      expect((await api.request(method, path, { token: otherOrg })).status, `${method} ${path}`).toBe(404);
    }
    // A session in the other org cannot name it either.
    const session = await api.request("POST", "/v1/sessions", { token: otherOrg, body: { prebuildId: prebuild.id } });
    expect(session.status).toBe(400);
    expect(message(session)).toBe(`body.prebuildId: no prebuild "${prebuild.id}" in this organization`);
  });
});

describe("sessions name repositories and prebuilds by id", () => {
  it("a {repoId} repo takes the stored URL, default branch, credential and service commands (cwd under the repo's directory)", async () => {
    const repoId = await createRepo({
      url: "https://github.com/acme/api.git",
      defaultBranch: "develop",
      credential: "GITHUB_TOKEN",
      serviceCommands: [{ name: "api", command: "npm start", cwd: "server" }],
    });
    const res = await api.request("POST", "/v1/sessions", { body: { repos: [{ repoId, workspacePath: "svc" }] } });
    expect(res.status, res.text).toBe(201);
    const s = await storedSession(runtime, (res.body as { session: { id: string } }).session.id);
    expect(s.repos).toEqual([{ url: "https://github.com/acme/api.git", branch: "develop", workspacePath: "svc", credential: "GITHUB_TOKEN", repoId }]);
    expect(s.serviceCommands).toEqual([{ name: "api", command: "npm start", cwd: "svc/server" }]);
  });

  it("400s naming the field", async () => {
    const repoId = await createRepo({ url: "https://github.com/acme/one.git" });
    const cases: [unknown, string, string?][] = [
      [{ repos: [{}] }, "body.repos.0.url"],
      [{ repos: [{ url: "https://github.com/a/b.git", repoId }] }, "body.repos.0.repoId", "either url or repoId"],
      [{ repos: [{ repoId, credential: "GITHUB_TOKEN" }] }, "body.repos.0.credential"],
      [{ repos: [{ repoId: "repo_0000000000000000000000000a" }] }, "body.repos.0.repoId", "unknown or deleted"],
      [{ repos: [{ repoId }, { repoId }] }, "body.repos.1.workspacePath", "same directory"],
      [{ prebuildId: "pb_0000000000000000000000000a" }, "body.prebuildId"],
    ];
    for (const [body, field, mentions] of cases) {
      const res = await api.request("POST", "/v1/sessions", { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(message(res).startsWith(`${field}:`), message(res)).toBe(true);
      if (mentions) expect(message(res)).toContain(mentions);
    }
    const prebuild = await api.request("POST", "/v1/prebuilds", { body: { name: "one", repos: [{ repoId }] } });
    const prebuildId = (prebuild.body as { prebuild: { id: string } }).prebuild.id;
    const both = await api.request("POST", "/v1/sessions", { body: { prebuildId, repos: [{ url: "https://github.com/a/b.git" }] } });
    expect(both.status).toBe(400);
    expect(message(both)).toMatch(/^body\.repos: /);
    const ok = await api.request("POST", "/v1/sessions", { body: { prebuildId } });
    expect(ok.status).toBe(201);
    const s = await storedSession(runtime, (ok.body as { session: { id: string } }).session.id);
    expect(s).toMatchObject({ prebuildId, provider: "local", repos: [{ url: "https://github.com/acme/one.git", repoId }] });
  });
});
