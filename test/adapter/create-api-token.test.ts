import { execFile } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { newApiToken } from "../../functions/domain/ids";
import { apiTokenId, DynamoApiTokenStore, hashToken } from "../../functions/store/dynamo-session-store";
import { DynamoConnectionRegistry } from "../../functions/store/dynamo-session-items";
import { keys } from "../../functions/store/table-layout";
import { startTestTable, type TestTable } from "../support/dynalite";

const run = promisify(execFile);
let table: TestTable;

beforeAll(async () => {
  table = await startTestTable();
});
afterAll(async () => table.close());

it("issues a token that resolves to the given user and org, printing it once", async () => {
  const { stdout } = await run(process.execPath, ["--import", "tsx", "scripts/create-api-token.ts", "--table", table.tableName, "--org", "acme", "--user", "alice"], {
    env: { ...process.env, DYNAMODB_ENDPOINT: table.endpoint },
  });
  const token = stdout.trim();
  expect(token).toMatch(/^sbx_[A-Za-z0-9_-]{43}$/);
  expect(await new DynamoApiTokenStore(table.doc, table.tableName).resolveToken(token)).toMatchObject({ userId: "alice", orgId: "acme", role: "member" });
});

it("issues an admin token with --role admin, and refuses a role that does not exist", async () => {
  const env = { ...process.env, DYNAMODB_ENDPOINT: table.endpoint };
  const base = ["--import", "tsx", "scripts/create-api-token.ts", "--table", table.tableName, "--org", "acme", "--user", "root"];
  const { stdout } = await run(process.execPath, [...base, "--role", "admin"], { env });
  expect(await new DynamoApiTokenStore(table.doc, table.tableName).resolveToken(stdout.trim())).toMatchObject({ userId: "root", orgId: "acme", role: "admin" });
  const err = await run(process.execPath, [...base, "--role", "owner"], { env }).catch((e: unknown) => e as { code: number; stderr: string });
  expect(err).toMatchObject({ code: 1 });
  expect((err as { stderr: string }).stderr).toContain("--role must be one of admin, member");
});

describe("token roles (API.md \"Roles\")", () => {
  it("a token item written before roles existed (no role attribute) resolves as member", async () => {
    const token = newApiToken();
    await table.doc.send(
      new PutCommand({
        TableName: table.tableName,
        Item: { ...keys.apiToken(hashToken(token)), userId: "old", orgId: "acme", name: null, createdAt: "2024-01-01T00:00:00.000Z" },
      }),
    );
    expect(await new DynamoApiTokenStore(table.doc, table.tableName).resolveToken(token)).toMatchObject({ userId: "old", orgId: "acme", role: "member" });
  });

  it("putToken stores member unless told admin; a stored role that is no role resolves to nobody", async () => {
    const store = new DynamoApiTokenStore(table.doc, table.tableName);
    const [member, admin, odd] = [newApiToken(), newApiToken(), newApiToken()];
    await store.putToken(member, { userId: "m", orgId: "acme" }, new Date());
    await store.putToken(admin, { userId: "a", orgId: "acme", role: "admin" }, new Date());
    expect((await store.resolveToken(member))?.role).toBe("member");
    expect((await store.resolveToken(admin))?.role).toBe("admin");
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...keys.apiToken(hashToken(odd)), userId: "o", orgId: "acme", role: "owner" } }));
    expect(await store.resolveToken(odd)).toBeNull();
  });
});

it("refuses to run without the required flags", async () => {
  const err = await run(process.execPath, ["--import", "tsx", "scripts/create-api-token.ts", "--table", table.tableName], {
    env: { ...process.env, DYNAMODB_ENDPOINT: table.endpoint },
  }).catch((e: unknown) => e as { code: number; stderr: string });
  expect(err).toMatchObject({ code: 1 });
  expect((err as { stderr: string }).stderr).toContain("--org, --user");
});

describe("token expiry (issue 14 item 5)", () => {
  it("--expires-in stores an expiry: the token resolves before it and not after; stderr names the token id", async () => {
    const { stdout, stderr } = await run(
      process.execPath,
      ["--import", "tsx", "scripts/create-api-token.ts", "--table", table.tableName, "--org", "acme", "--user", "erin", "--expires-in", "2d"],
      { env: { ...process.env, DYNAMODB_ENDPOINT: table.endpoint } },
    );
    const token = stdout.trim();
    const store = new DynamoApiTokenStore(table.doc, table.tableName);
    const principal = await store.resolveToken(token);
    const expiresAt = principal?.credential?.expiresAt ?? "";
    expect(Date.parse(expiresAt) - Date.now()).toBeGreaterThan(47 * 3600_000);
    expect(stderr).toContain(`token id ${apiTokenId(hashToken(token))}, expires ${expiresAt}`);
    expect(await store.resolveToken(token, new Date(Date.parse(expiresAt) - 1))).not.toBeNull();
    expect(await store.resolveToken(token, new Date(Date.parse(expiresAt)))).toBeNull();
  });

  it("refuses a bad expiry, naming the flag, and stores nothing", async () => {
    const err = await run(
      process.execPath,
      ["--import", "tsx", "scripts/create-api-token.ts", "--table", table.tableName, "--org", "acme", "--user", "x", "--expires-at", "2001-01-01T00:00:00Z"],
      { env: { ...process.env, DYNAMODB_ENDPOINT: table.endpoint } },
    ).catch((e: unknown) => e as { code: number; stdout: string; stderr: string });
    expect(err).toMatchObject({ code: 1, stdout: "" });
    expect((err as { stderr: string }).stderr).toContain("--expires-at must be in the future");
  });
});

describe("token:revoke (issue 14 item 5)", () => {
  /** A stand-in for API Gateway's Management API over a real socket: records each DeleteConnection. */
  async function managementApi(goneIds: string[] = []): Promise<{ url: string; deleted: string[]; close(): Promise<void> }> {
    const deleted: string[] = [];
    const server = createServer((req, res) => {
      const match = /^\/live\/@connections\/([^/?]+)$/.exec(req.url ?? "");
      if (req.method !== "DELETE" || !match?.[1]) {
        res.writeHead(404).end();
        return;
      }
      const id = decodeURIComponent(match[1]);
      if (goneIds.includes(id)) {
        res.writeHead(410, { "content-type": "application/json", "x-amzn-errortype": "GoneException" }).end('{"message":"gone"}');
        return;
      }
      deleted.push(id);
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}/live`, deleted, close: () => new Promise((resolve) => server.close(() => resolve())) };
  }

  const awsEnv = () => ({ ...process.env, DYNAMODB_ENDPOINT: table.endpoint, AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test", AWS_REGION: "us-east-1" });
  const revoke = (...args: string[]) => run(process.execPath, ["--import", "tsx", "scripts/revoke-api-token.ts", "--table", table.tableName, ...args], { env: awsEnv() });

  async function connectWith(token: string, connectionId: string, sessionId: string): Promise<void> {
    const store = new DynamoApiTokenStore(table.doc, table.tableName);
    const principal = await store.resolveToken(token);
    const tokenId = principal?.credential?.tokenId ?? "";
    await store.trackConnection(tokenId, { connectionId, sessionId }, new Date());
    await new DynamoConnectionRegistry(table.doc, table.tableName).add({ connectionId, sessionId, userId: "u", clientType: "web", connectedAt: new Date().toISOString(), tokenId, tokenExpiresAt: null });
  }

  it("revokes by id and closes the token's connections through the management API (DeleteConnection)", async () => {
    const store = new DynamoApiTokenStore(table.doc, table.tableName);
    const token = newApiToken();
    const bystander = newApiToken();
    await store.putToken(token, { userId: "gina", orgId: "acme" }, new Date());
    await store.putToken(bystander, { userId: "hal", orgId: "acme" }, new Date());
    await connectWith(token, "conn-A=", "ses_a");
    await connectWith(token, "conn-B=", "ses_b");
    await connectWith(token, "conn-gone=", "ses_b");
    await connectWith(bystander, "conn-C=", "ses_a");
    const api = await managementApi(["conn-gone="]);
    try {
      const { stdout } = await revoke("--ws-endpoint", api.url, apiTokenId(hashToken(token)));
      expect(stdout).toContain(`revoked ${apiTokenId(hashToken(token))} (user gina, org acme)`);
      expect(stdout).toContain("websocket connections: 2 closed, 1 already gone");
      expect(api.deleted.sort()).toEqual(["conn-A=", "conn-B="]);
    } finally {
      await api.close();
    }
    expect(await store.resolveToken(token)).toBeNull();
    expect(await store.resolveToken(bystander)).not.toBeNull();
    const registry = new DynamoConnectionRegistry(table.doc, table.tableName);
    // Marked as well: should a close not get through, $default refuses the next frame.
    expect((await registry.lookup("conn-A="))?.revokedAt).toEqual(expect.any(String));
    expect((await registry.lookup("conn-C="))?.revokedAt).toBeUndefined();
  });

  it("without --ws-endpoint marks the connections (closed at their next frame) and says so", async () => {
    const store = new DynamoApiTokenStore(table.doc, table.tableName);
    const token = newApiToken();
    await store.putToken(token, { userId: "ivy", orgId: "acme" }, new Date());
    await connectWith(token, "conn-D=", "ses_d");
    const { stdout } = await revoke(token);
    expect(stdout).toContain("0 closed, 0 already gone, 1 marked (closed at their next frame");
    expect((await new DynamoConnectionRegistry(table.doc, table.tableName).lookup("conn-D="))?.revokedAt).toEqual(expect.any(String));
  });

  it("finds a token issued before token ids existed (no id lookup item) by its id or a prefix of it", async () => {
    const token = newApiToken();
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...keys.apiToken(hashToken(token)), userId: "old", orgId: "acme", name: null, createdAt: "2024-01-01T00:00:00.000Z" } }));
    const id = apiTokenId(hashToken(token));
    const { stdout } = await revoke(id.slice(0, 14));
    expect(stdout).toContain(`revoked ${id} (user old, org acme)`);
    expect(await new DynamoApiTokenStore(table.doc, table.tableName).resolveToken(token)).toBeNull();
  });

  it("refuses an unknown or malformed reference, naming it", async () => {
    const unknown = await revoke("tok_00000000000000000000").catch((e: unknown) => e as { code: number; stderr: string });
    expect(unknown).toMatchObject({ code: 1 });
    expect((unknown as { stderr: string }).stderr).toContain("no API token");
    const malformed = await revoke("tok_xyz").catch((e: unknown) => e as { code: number; stderr: string });
    expect((malformed as { stderr: string }).stderr).toContain("token: expected a token id");
  });
});
