/**
 * The org secret store against dynalite with the local key wrapper: metadata round trips,
 * rotation keeps createdAt, orgs never see each other's secrets, `existing` and `reveal` read in
 * batches (unprocessed keys retried), and the item in the table never holds the value.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchGetCommand, GetCommand, PutCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { ValidationError } from "../../functions/domain/errors";
import { SecretDecryptionError } from "../../functions/secrets/envelope-cipher";
import { LocalSecretKeyWrapper } from "../../functions/secrets/local-key-wrapper";
import { DynamoOrgSecretStore } from "../../functions/store/dynamo-org-secrets";
import { keys } from "../../functions/store/table-layout";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let store: DynamoOrgSecretStore;
const wrapper = new LocalSecretKeyWrapper(Buffer.alloc(32, 3));
const T0 = new Date("2025-01-01T00:00:00.000Z");
const T1 = new Date("2025-02-01T00:00:00.000Z");
const T2 = new Date("2025-03-01T00:00:00.000Z");
/** Unique per test: every test works in orgs of its own. */
const org = (label: string) => `${label}-${Math.random().toString(36).slice(2, 8)}`;

beforeAll(async () => {
  table = await startTestTable();
  store = new DynamoOrgSecretStore(table.doc, table.tableName, wrapper);
});
afterAll(async () => table.close());

const rawItem = async (orgId: string, name: string) =>
  (await table.doc.send(new GetCommand({ TableName: table.tableName, Key: keys.secret(orgId, name), ConsistentRead: true }))).Item;

describe("put / get", () => {
  it("creates a secret and answers its metadata only", async () => {
    const acme = org("acme");
    const created = await store.put({ orgId: acme, name: "GITHUB_TOKEN", value: "ghp_first-value-000000000000", description: "CI bot", now: T0 });
    expect(created).toEqual({ name: "GITHUB_TOKEN", description: "CI bot", createdAt: T0.toISOString(), updatedAt: T0.toISOString() });
    expect(await store.get(acme, "GITHUB_TOKEN")).toEqual(created);
    expect(await store.get(acme, "OTHER")).toBeNull();
  });

  it("rotation replaces the value: createdAt stays, updatedAt moves; an omitted description stays, null clears it", async () => {
    const acme = org("acme");
    await store.put({ orgId: acme, name: "MODEL_KEY", value: "value-one", description: "the model key", now: T0 });
    const rotated = await store.put({ orgId: acme, name: "MODEL_KEY", value: "value-two", now: T1 });
    expect(rotated).toEqual({ name: "MODEL_KEY", description: "the model key", createdAt: T0.toISOString(), updatedAt: T1.toISOString() });
    expect(await store.reveal(acme, ["MODEL_KEY"])).toEqual({ MODEL_KEY: "value-two" });
    const cleared = await store.put({ orgId: acme, name: "MODEL_KEY", value: "value-three", description: null, now: T2 });
    expect(cleared).toEqual({ name: "MODEL_KEY", description: null, createdAt: T0.toISOString(), updatedAt: T2.toISOString() });
    expect(await store.get(acme, "MODEL_KEY")).toEqual(cleared);
  });

  it("a new secret without a description has description null", async () => {
    const acme = org("acme");
    expect((await store.put({ orgId: acme, name: "_X", value: "v", now: T0 })).description).toBeNull();
  });

  it("stores only an envelope: the value is nowhere in the item", async () => {
    const acme = org("acme");
    const value = "sk-ant-api03-THE-PLAINTEXT-VALUE-0123456789";
    await store.put({ orgId: acme, name: "ANTHROPIC_API_KEY", value, now: T0 });
    const item = await rawItem(acme, "ANTHROPIC_API_KEY");
    expect(item).toMatchObject({ PK: `ORG#${acme}`, SK: "SECRET#ANTHROPIC_API_KEY", name: "ANTHROPIC_API_KEY", envelope: { v: 1, alg: "AES-256-GCM" } });
    const stored = JSON.stringify(item);
    expect(stored).not.toContain(value);
    expect(stored).not.toContain("THE-PLAINTEXT");
    expect(stored).not.toContain(Buffer.from(value).toString("base64").slice(0, 12));
  });

  it("refuses a name that breaks the pattern and an oversized value, echoing neither value", async () => {
    const acme = org("acme");
    await expect(store.put({ orgId: acme, name: "1BAD", value: "v", now: T0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(store.put({ orgId: acme, name: "has-dash", value: "v", now: T0 })).rejects.toBeInstanceOf(ValidationError);
    const err = (await store.put({ orgId: acme, name: "BIG", value: "z".repeat(32 * 1024 + 1), now: T0 }).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(ValidationError);
    expect(err.message).not.toContain("zzzz");
    expect(await rawItem(acme, "BIG")).toBeUndefined();
  });
});

describe("list", () => {
  it("lists one org's secrets by name, metadata only", async () => {
    const [acme, other] = [org("acme"), org("other")];
    for (const name of ["b_second", "A_FIRST", "c_third"]) await store.put({ orgId: acme, name, value: `value of ${name}`, now: T0 });
    await store.put({ orgId: other, name: "NOT_YOURS", value: "x", now: T0 });
    const items = await store.list(acme);
    expect(items.map((s) => s.name)).toEqual(["A_FIRST", "b_second", "c_third"]);
    for (const item of items) expect(Object.keys(item).sort()).toEqual(["createdAt", "description", "name", "updatedAt"]);
    expect(await store.list(org("empty"))).toEqual([]);
  });

  it("reads past a page: more secrets than one 1 MB query page holds", async () => {
    const acme = org("big");
    // ~45 KB envelopes: a page stops near 1 MB (~22 items) even though only metadata is projected.
    const value = "v".repeat(32 * 1024);
    const names = Array.from({ length: 30 }, (_, i) => `S${String(i).padStart(2, "0")}`);
    await Promise.all(names.map((name) => store.put({ orgId: acme, name, value, now: T0 })));
    expect((await store.list(acme)).map((s) => s.name)).toEqual(names);
  });
});

describe("delete", () => {
  it("removes a secret once: true, then false; other orgs' secrets are untouched", async () => {
    const [acme, other] = [org("acme"), org("other")];
    await store.put({ orgId: acme, name: "TOKEN", value: "a", now: T0 });
    await store.put({ orgId: other, name: "TOKEN", value: "b", now: T0 });
    expect(await store.delete(acme, "TOKEN")).toBe(true);
    expect(await store.delete(acme, "TOKEN")).toBe(false);
    expect(await store.get(acme, "TOKEN")).toBeNull();
    expect(await store.reveal(other, ["TOKEN"])).toEqual({ TOKEN: "b" });
    expect(await store.delete(acme, "not a name")).toBe(false);
  });
});

describe("existing / reveal", () => {
  it("existing: which of the names the org has (duplicates, unknown and malformed names ignored)", async () => {
    const [acme, other] = [org("acme"), org("other")];
    await store.put({ orgId: acme, name: "ONE", value: "1", now: T0 });
    await store.put({ orgId: acme, name: "TWO", value: "2", now: T0 });
    await store.put({ orgId: other, name: "THREE", value: "3", now: T0 });
    expect(await store.existing(acme, ["ONE", "TWO", "ONE", "THREE", "MISSING", "bad-name", ""])).toEqual(new Set(["ONE", "TWO"]));
    expect(await store.existing(acme, [])).toEqual(new Set());
  });

  it("reveal: decrypted values of the names that exist in the org, nothing of another org's", async () => {
    const [acme, other] = [org("acme"), org("other")];
    await store.put({ orgId: acme, name: "GIT", value: "ghp_acme-git", now: T0 });
    await store.put({ orgId: acme, name: "MODEL", value: "ünïcødé ✓ value", now: T0 });
    await store.put({ orgId: other, name: "OTHER", value: "other's", now: T0 });
    expect(await store.reveal(acme, ["GIT", "MODEL", "OTHER", "MISSING"])).toEqual({ GIT: "ghp_acme-git", MODEL: "ünïcødé ✓ value" });
    expect(await store.reveal(acme, [])).toEqual({});
  });

  it("a secret named __proto__ is an ordinary entry, not a prototype", async () => {
    const acme = org("acme");
    await store.put({ orgId: acme, name: "__proto__", value: "still a value", now: T0 });
    const revealed = await store.reveal(acme, ["__proto__"]);
    expect(Object.getPrototypeOf(revealed)).toBe(Object.prototype);
    expect(Object.entries(revealed)).toEqual([["__proto__", "still a value"]]);
  });

  it("reads more than one batch (100 keys) and retries unprocessed keys", async () => {
    const acme = org("many");
    const names = Array.from({ length: 130 }, (_, i) => `K${i}`);
    await Promise.all(names.map((name, i) => store.put({ orgId: acme, name, value: `value-${i}`, now: T0 })));
    // A client that leaves half of the first batch unprocessed, as DynamoDB does when throttled.
    let batchCalls = 0;
    const doc = {
      send: async (command: unknown) => {
        if (command instanceof BatchGetCommand && batchCalls++ === 0) {
          const request = command.input.RequestItems?.[table.tableName];
          const requested = request?.Keys ?? [];
          const half = Math.floor(requested.length / 2);
          const out = await table.doc.send(new BatchGetCommand({ RequestItems: { [table.tableName]: { ...request, Keys: requested.slice(0, half) } } }));
          return { ...out, UnprocessedKeys: { [table.tableName]: { ...request, Keys: requested.slice(half) } } };
        }
        return table.doc.send(command as never);
      },
    } as unknown as DynamoDBDocumentClient;
    const flaky = new DynamoOrgSecretStore(doc, table.tableName, wrapper);
    const revealed = await flaky.reveal(acme, [...names, "ABSENT"]);
    expect(Object.keys(revealed).sort()).toEqual([...names].sort());
    expect(revealed.K129).toBe("value-129");
    // Two chunks (100 + 31 keys), the first one read twice.
    expect(batchCalls).toBe(3);
    expect((await flaky.existing(acme, names)).size).toBe(130);
  });

  it("an envelope copied into another org's (or name's) item does not decrypt there", async () => {
    const [acme, thief] = [org("acme"), org("thief")];
    await store.put({ orgId: acme, name: "PROD_KEY", value: "the production key", now: T0 });
    const item = await rawItem(acme, "PROD_KEY");
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...item, ...keys.secret(thief, "PROD_KEY") } }));
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...item, ...keys.secret(acme, "RENAMED"), name: "RENAMED" } }));
    expect(await store.existing(thief, ["PROD_KEY"])).toEqual(new Set(["PROD_KEY"]));
    const err = (await store.reveal(thief, ["PROD_KEY"]).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(SecretDecryptionError);
    expect(err.message).not.toContain("the production key");
    await expect(store.reveal(acme, ["RENAMED"])).rejects.toBeInstanceOf(SecretDecryptionError);
    expect(await store.reveal(acme, ["PROD_KEY"])).toEqual({ PROD_KEY: "the production key" });
  });
});
