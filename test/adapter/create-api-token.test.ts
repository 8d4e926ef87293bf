import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { newApiToken } from "../../functions/domain/ids";
import { DynamoApiTokenStore, hashToken } from "../../functions/store/dynamo-session-store";
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
