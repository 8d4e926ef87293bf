/**
 * Section 8: what an org secret costs per month, stored the way the control plane stores it
 * (KMS envelope encryption in the table, functions/store/dynamo-org-secrets.ts) against AWS
 * Secrets Manager, at list prices. The per-operation figures are measured, not assumed: the real
 * store runs against dynalite (capacity units it reports, item sizes) with a key wrapper that
 * counts the calls KMS would get. Figures only, never assertions.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import type { SecretContext, SecretKeyWrapper } from "../../functions/ports/secret-key-wrapper";
import { LocalSecretKeyWrapper } from "../../functions/secrets/local-key-wrapper";
import { DynamoOrgSecretStore } from "../../functions/store/dynamo-org-secrets";
import { keys } from "../../functions/store/table-layout";
import { startTestTable } from "../support/dynalite";
import { heading, note, table } from "./report";

/** us-east-1 list prices (USD), no free tiers. */
export const SECRET_PRICES = {
  secretsManagerPerSecretMonth: 0.4,
  secretsManagerPer10kCalls: 0.05,
  kmsKeyPerMonth: 1.0,
  kmsPer10kRequests: 0.03,
  dynamoPerMillionRru: 0.125,
  dynamoPerMillionWru: 0.625,
  dynamoPerGbMonth: 0.25,
} as const;

/** Measured per secret: what one store (rotation) and one reveal of it take. */
export interface SecretOpCosts {
  kmsPerPut: number;
  kmsPerReveal: number;
  wruPerPut: number;
  rruPerReveal: number;
  itemBytes: number;
}

export interface SecretMonth {
  /** Secrets in the account (they share the one KMS key). */
  secrets: number;
  readsPerSecret: number;
  writesPerSecret: number;
}

/** USD per secret per month, both ways. */
export function secretCostPerMonth(load: SecretMonth, ops: SecretOpCosts): { secretsManager: number; envelope: number } {
  const p = SECRET_PRICES;
  const calls = load.readsPerSecret + load.writesPerSecret;
  const secretsManager = p.secretsManagerPerSecretMonth + (calls * p.secretsManagerPer10kCalls) / 10_000;
  const kmsRequests = load.readsPerSecret * ops.kmsPerReveal + load.writesPerSecret * ops.kmsPerPut;
  const envelope =
    p.kmsKeyPerMonth / load.secrets +
    (kmsRequests * p.kmsPer10kRequests) / 10_000 +
    (load.readsPerSecret * ops.rruPerReveal * p.dynamoPerMillionRru) / 1_000_000 +
    (load.writesPerSecret * ops.wruPerPut * p.dynamoPerMillionWru) / 1_000_000 +
    (ops.itemBytes / 1024 ** 3) * p.dynamoPerGbMonth;
  return { secretsManager, envelope };
}

/** A key wrapper that counts the calls KMS would get (wrap = Encrypt, unwrap = Decrypt). */
function countingWrapper(inner: SecretKeyWrapper, counts: { wrap: number; unwrap: number }): SecretKeyWrapper {
  return {
    wrap: (dataKey: Uint8Array, context: SecretContext) => {
      counts.wrap++;
      return inner.wrap(dataKey, context);
    },
    unwrap: (wrapped: Uint8Array, context: SecretContext) => {
      counts.unwrap++;
      return inner.unwrap(wrapped, context);
    },
  };
}

type Capacity = { CapacityUnits?: number } | { CapacityUnits?: number }[] | undefined;

/** Sums the consumed capacity every request through the client reports (dynalite computes it as DynamoDB does). */
function countingDoc(doc: DynamoDBDocumentClient, units: { total: number }): DynamoDBDocumentClient {
  return {
    send: async (command: { input: Record<string, unknown> }) => {
      command.input.ReturnConsumedCapacity = "TOTAL";
      const out = (await doc.send(command as never)) as { ConsumedCapacity?: Capacity };
      for (const c of [out.ConsumedCapacity ?? []].flat()) units.total += c.CapacityUnits ?? 0;
      return out;
    },
  } as unknown as DynamoDBDocumentClient;
}

/** DynamoDB's billed item size: attribute names plus values (UTF-8), plus the 100 bytes of index overhead storage is billed with. */
function itemSize(item: Record<string, unknown>): number {
  const size = (v: unknown): number => {
    if (typeof v === "string") return Buffer.byteLength(v, "utf8");
    if (typeof v === "number") return 8;
    if (v === null || typeof v === "boolean") return 1;
    if (typeof v === "object") return 3 + Object.entries(v as Record<string, unknown>).reduce((n, [k, x]) => n + 1 + Buffer.byteLength(k) + size(x), 0);
    return 0;
  };
  return Object.entries(item).reduce((n, [k, v]) => n + Buffer.byteLength(k) + size(v), 0) + 100;
}

async function measure(valueBytes: number): Promise<SecretOpCosts> {
  const test = await startTestTable();
  try {
    const calls = { wrap: 0, unwrap: 0 };
    const units = { total: 0 };
    const store = new DynamoOrgSecretStore(countingDoc(test.doc, units), test.tableName, countingWrapper(new LocalSecretKeyWrapper(Buffer.alloc(32, 9)), calls));
    const orgId = "bench-org";
    const value = "v".repeat(valueBytes);
    await store.put({ orgId, name: "FIRST", value, description: "a bench secret", now: new Date() });
    // A rotation of the same secret: what every later write costs.
    units.total = 0;
    calls.wrap = 0;
    await store.put({ orgId, name: "FIRST", value, now: new Date() });
    const wruPerPut = units.total;
    const kmsPerPut = calls.wrap;
    units.total = 0;
    await store.reveal(orgId, ["FIRST"]);
    const rruPerReveal = units.total;
    const item = (await test.doc.send(new GetCommand({ TableName: test.tableName, Key: keys.secret(orgId, "FIRST") }))).Item ?? {};
    return { kmsPerPut, kmsPerReveal: calls.unwrap, wruPerPut, rruPerReveal, itemBytes: itemSize(item) };
  } finally {
    await test.close();
  }
}

const usd = (v: number): string => (v >= 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(6)}`);

export async function benchOrgSecrets(): Promise<void> {
  heading("8. org secrets: KMS envelope in the table vs Secrets Manager, per secret per month");
  const sizes = [
    ["token (100 B)", 100],
    ["PEM key (4 KiB)", 4 * 1024],
    ["largest (32 KiB)", 32 * 1024],
  ] as const;
  const measured: [string, SecretOpCosts][] = [];
  for (const [label, bytes] of sizes) measured.push([label, await measure(bytes)]);
  note("measured on dynalite with the real store (one rotation, then one reveal of that secret):");
  table(
    ["value", "item size", "WRU / put", "RRU / reveal", "KMS calls / put", "KMS calls / reveal"],
    measured.map(([label, m]) => [label, `${m.itemBytes} B`, m.wruPerPut, m.rruPerReveal, m.kmsPerPut, m.kmsPerReveal]),
  );

  const token = measured[0]?.[1];
  if (!token) return;
  const reads = 100;
  const writes = 1;
  note("");
  note(`cost per secret per month, token-sized values, each read ${reads} times and rotated ${writes} time a month:`);
  table(
    ["secrets", "Secrets Manager", "KMS envelope", "ratio"],
    [1, 10, 100, 1_000, 10_000].map((secrets) => {
      const c = secretCostPerMonth({ secrets, readsPerSecret: reads, writesPerSecret: writes }, token);
      return [secrets.toLocaleString("en-US"), usd(c.secretsManager), usd(c.envelope), `${(c.secretsManager / c.envelope).toFixed(1)}x`];
    }),
  );
  const thousand = secretCostPerMonth({ secrets: 1_000, readsPerSecret: reads, writesPerSecret: writes }, token);
  note("");
  note(`1,000 secrets: Secrets Manager $${(thousand.secretsManager * 1_000).toFixed(2)}/month, KMS envelope $${(thousand.envelope * 1_000).toFixed(2)}/month.`);
  note("list prices (us-east-1, no free tiers): Secrets Manager $0.40 per secret-month + $0.05 per 10,000 API calls;");
  note("KMS $1 per customer-managed key-month (one key for every secret) + $0.03 per 10,000 requests; DynamoDB on-demand");
  note("$0.125 per million RRU, $0.625 per million WRU, $0.25 per GB-month. A reveal is a strongly consistent BatchGetItem");
  note("(one item per named secret, 1 RRU per 4 KB) and one KMS Decrypt per secret; a put is one UpdateItem and one KMS Encrypt.");
  // Where the shared key's $1 stops outweighing $0.40 per secret.
  const perSecretWithoutKey = thousand.envelope - SECRET_PRICES.kmsKeyPerMonth / 1_000;
  const breakEven = Math.ceil(SECRET_PRICES.kmsKeyPerMonth / (thousand.secretsManager - perSecretWithoutKey));
  note(`break-even: from ${breakEven} secrets on, the envelope is cheaper. Automatic key rotation (enabled) adds $1/month for`);
  const rotatedBreakEven = Math.ceil((3 * SECRET_PRICES.kmsKeyPerMonth) / (thousand.secretsManager - perSecretWithoutKey));
  note(`each of the key's first two rotations (yearly): at most $3/month for the key, which moves the break-even to ${rotatedBreakEven} secrets.`);
}
