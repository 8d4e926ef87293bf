/**
 * /v1/secrets over the local runtime (API.md "Secrets" and "Roles"): admins store, rotate and
 * delete; members read metadata only; other orgs see nothing; no response ever carries a value.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { LocalSecretKeyWrapper } from "../../functions/secrets/local-key-wrapper";
import { createDocumentClient } from "../../functions/store/dynamo-client";
import { DynamoOrgSecretStore } from "../../functions/store/dynamo-org-secrets";
import type { LocalRuntime } from "../../infra/local/runtime";
import { DEV_PRINCIPAL } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient, type ApiResponse } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let memberToken: string;
let otherAdminToken: string;
/** Every response of this file: none may contain a value that was stored. */
const seen: ApiResponse[] = [];
const VALUES = ["ghp_e2eFirstValue0123456789abcdefABCDEF", "ghp_e2eRotatedValue0123456789abcdefABCD", "sk-ant-api03-e2e-other-org-value-0123456789"];

interface SecretBody {
  secret: { name: string; description: string | null; createdAt: string; updatedAt: string };
}

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest());
  memberToken = await runtime.addApiToken({ userId: "bob", orgId: DEV_PRINCIPAL.orgId });
  otherAdminToken = await runtime.addApiToken({ userId: "eve", orgId: "org-other", role: "admin" });
});
afterAll(async () => runtime.close());

async function call(method: string, path: string, options: { token?: string; body?: unknown; rawBody?: string } = {}): Promise<ApiResponse> {
  const res = await api.request(method, path, options);
  seen.push(res);
  return res;
}

describe("admin: put, list, get, rotate, delete", () => {
  it("PUT stores a secret and answers its metadata, never the value", async () => {
    const res = await call("PUT", "/v1/secrets/GITHUB_TOKEN", { body: { value: VALUES[0], description: "CI bot" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { secret } = res.body as SecretBody;
    expect(Object.keys(secret).sort()).toEqual(["createdAt", "description", "name", "updatedAt"]);
    expect(secret).toMatchObject({ name: "GITHUB_TOKEN", description: "CI bot" });
    expect(secret.createdAt).toBe(secret.updatedAt);
    // The control plane itself can read it back (what provision does).
    expect(await runtime.deps.secrets.reveal(DEV_PRINCIPAL.orgId, ["GITHUB_TOKEN"])).toEqual({ GITHUB_TOKEN: VALUES[0] });
  });

  it("GET lists and shows it", async () => {
    const list = await call("GET", "/v1/secrets");
    expect(list.status).toBe(200);
    const items = (list.body as { items: SecretBody["secret"][] }).items;
    expect(items.map((s) => s.name)).toContain("GITHUB_TOKEN");
    const one = await call("GET", "/v1/secrets/GITHUB_TOKEN");
    expect(one.status).toBe(200);
    expect((one.body as SecretBody).secret).toEqual(items.find((s) => s.name === "GITHUB_TOKEN"));
  });

  it("PUT again rotates the value: createdAt stays, updatedAt moves, the description stays", async () => {
    const before = ((await call("GET", "/v1/secrets/GITHUB_TOKEN")).body as SecretBody).secret;
    await new Promise((r) => setTimeout(r, 5)); // timestamps have millisecond resolution
    const res = await call("PUT", "/v1/secrets/GITHUB_TOKEN", { body: { value: VALUES[1] } });
    expect(res.status).toBe(200);
    const after = (res.body as SecretBody).secret;
    expect(after.createdAt).toBe(before.createdAt);
    expect(Date.parse(after.updatedAt)).toBeGreaterThan(Date.parse(before.updatedAt));
    expect(after.description).toBe("CI bot");
    expect(await runtime.deps.secrets.reveal(DEV_PRINCIPAL.orgId, ["GITHUB_TOKEN"])).toEqual({ GITHUB_TOKEN: VALUES[1] });
  });

  it("DELETE removes it: 204, then 404 for GET and DELETE", async () => {
    await call("PUT", "/v1/secrets/TO_DELETE", { body: { value: "short-lived" } });
    const res = await call("DELETE", "/v1/secrets/TO_DELETE");
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect((await call("GET", "/v1/secrets/TO_DELETE")).status).toBe(404);
    const again = await call("DELETE", "/v1/secrets/TO_DELETE");
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ error: { code: "not_found", message: "secret TO_DELETE not found" } });
  });
});

describe("roles", () => {
  it("a member may read metadata but PUT and DELETE are 403, and change nothing", async () => {
    expect((await call("GET", "/v1/secrets", { token: memberToken })).status).toBe(200);
    expect((await call("GET", "/v1/secrets/GITHUB_TOKEN", { token: memberToken })).status).toBe(200);
    const put = await call("PUT", "/v1/secrets/GITHUB_TOKEN", { token: memberToken, body: { value: "member-overwrite-attempt" } });
    expect(put.status).toBe(403);
    expect(put.body).toEqual({ error: { code: "forbidden", message: "this route needs the admin role" } });
    const created = await call("PUT", "/v1/secrets/MEMBER_MADE", { token: memberToken, body: { value: "member-value" } });
    expect(created.status).toBe(403);
    const del = await call("DELETE", "/v1/secrets/GITHUB_TOKEN", { token: memberToken });
    expect(del.status).toBe(403);
    expect(await runtime.deps.secrets.reveal(DEV_PRINCIPAL.orgId, ["GITHUB_TOKEN", "MEMBER_MADE"])).toEqual({ GITHUB_TOKEN: VALUES[1] });
  });

  it("no token is 401", async () => {
    expect((await call("GET", "/v1/secrets", { token: "" })).status).toBe(401);
  });
});

describe("orgs", () => {
  it("another org's admin sees none of them: not listed, 404 on GET and DELETE, and the same name is its own secret", async () => {
    const list = await call("GET", "/v1/secrets", { token: otherAdminToken });
    expect(list.status).toBe(200);
    expect((list.body as { items: unknown[] }).items).toEqual([]);
    expect((await call("GET", "/v1/secrets/GITHUB_TOKEN", { token: otherAdminToken })).status).toBe(404);
    expect((await call("DELETE", "/v1/secrets/GITHUB_TOKEN", { token: otherAdminToken })).status).toBe(404);
    const own = await call("PUT", "/v1/secrets/GITHUB_TOKEN", { token: otherAdminToken, body: { value: VALUES[2] } });
    expect(own.status).toBe(200);
    expect(await runtime.deps.secrets.reveal(DEV_PRINCIPAL.orgId, ["GITHUB_TOKEN"])).toEqual({ GITHUB_TOKEN: VALUES[1] });
    expect(await runtime.deps.secrets.reveal("org-other", ["GITHUB_TOKEN"])).toEqual({ GITHUB_TOKEN: VALUES[2] });
  });
});

describe("invalid input", () => {
  it("a name that breaks the pattern is 400 naming it", async () => {
    for (const name of ["1STARTS_WITH_DIGIT", "has-dash", "dot.ted", `A${"b".repeat(128)}`]) {
      const res = await call("PUT", `/v1/secrets/${name}`, { body: { value: "v" } });
      expect(res.status, name).toBe(400);
      expect((res.body as { error: { message: string } }).error.message, name).toMatch(/^name: /);
      expect((await call("GET", `/v1/secrets/${name}`)).status, name).toBe(400);
    }
    // The longest name allowed: 128 characters.
    expect((await call("PUT", `/v1/secrets/A${"b".repeat(127)}`, { body: { value: "v" } })).status).toBe(200);
  });

  it("an unknown field, a missing or empty value, a long description are 400 naming the field", async () => {
    const cases: [unknown, string][] = [
      [{ value: "v", extra: 1 }, 'body: unknown field "extra"'],
      [{ description: "no value" }, "body.value: "],
      [{ value: "" }, "body.value: "],
      [{ value: 42 }, "body.value: "],
      [{ value: "v", description: "d".repeat(501) }, "body.description: "],
    ];
    for (const [body, message] of cases) {
      const res = await call("PUT", "/v1/secrets/VALID_NAME", { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((res.body as { error: { message: string } }).error.message).toContain(message);
    }
    expect((await call("GET", "/v1/secrets/VALID_NAME")).status).toBe(404);
  });

  it("a value over 32 KiB is 400 (the limit is on UTF-8 bytes)", async () => {
    const res = await call("PUT", "/v1/secrets/BIG", { body: { value: "é".repeat(16 * 1024 + 1) } });
    expect(res.status).toBe(400);
    expect((res.body as { error: { message: string } }).error.message).toBe("body.value: must be at most 32768 bytes (UTF-8)");
  });
});

describe("the local master key", () => {
  it("DATA_DIR keeps it (secrets.key, mode 0600): secrets stored before a restart still decrypt", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "secrets-e2e-"));
    try {
      const first = await startRuntimeForTest({ dataDir });
      const put = await first.api.request("PUT", "/v1/secrets/KEPT", { body: { value: "survives a restart" } });
      expect(put.status).toBe(200);
      await first.runtime.close();
      expect(statSync(path.join(dataDir, "secrets.key")).mode & 0o777).toBe(0o600);
      const second = await startRuntimeForTest({ dataDir });
      try {
        expect(await second.runtime.deps.secrets.reveal(DEV_PRINCIPAL.orgId, ["KEPT"])).toEqual({ KEPT: "survives a restart" });
      } finally {
        await second.runtime.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("SECRETS_MASTER_KEY is the key the values are wrapped with", async () => {
    const master = Buffer.alloc(32, 0x5a);
    const local = await startRuntimeForTest({ env: { SECRETS_MASTER_KEY: master.toString("hex") } });
    try {
      expect((await local.api.request("PUT", "/v1/secrets/WRAPPED", { body: { value: "under a known key" } })).status).toBe(200);
      // A store over the same table with the same key reads it; another key cannot.
      const doc = createDocumentClient({ endpoint: String(local.runtime.config.DYNAMODB_ENDPOINT) });
      try {
        const same = new DynamoOrgSecretStore(doc, local.runtime.config.TABLE_NAME, new LocalSecretKeyWrapper(master));
        expect(await same.reveal(DEV_PRINCIPAL.orgId, ["WRAPPED"])).toEqual({ WRAPPED: "under a known key" });
        const other = new DynamoOrgSecretStore(doc, local.runtime.config.TABLE_NAME, new LocalSecretKeyWrapper(Buffer.alloc(32, 1)));
        await expect(other.reveal(DEV_PRINCIPAL.orgId, ["WRAPPED"])).rejects.toThrow("could not be decrypted");
      } finally {
        doc.destroy();
      }
    } finally {
      await local.runtime.close();
    }
  });
});

describe("values", () => {
  it("appear in no response of this file", () => {
    expect(seen.length).toBeGreaterThan(20);
    for (const res of seen) for (const value of VALUES) expect(res.text).not.toContain(value);
    for (const res of seen) expect(res.text).not.toContain("member-overwrite-attempt");
  });
});
