import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
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
  expect(await new DynamoApiTokenStore(table.doc, table.tableName).resolveToken(token)).toEqual({ userId: "alice", orgId: "acme" });
});

it("refuses to run without the required flags", async () => {
  const err = await run(process.execPath, ["--import", "tsx", "scripts/create-api-token.ts", "--table", table.tableName], {
    env: { ...process.env, DYNAMODB_ENDPOINT: table.endpoint },
  }).catch((e: unknown) => e as { code: number; stderr: string });
  expect(err).toMatchObject({ code: 1 });
  expect((err as { stderr: string }).stderr).toContain("--org, --user");
});
