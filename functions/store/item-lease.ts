/**
 * The one lease mechanism on a session item, used twice with different attributes: the flow
 * lease (`leaseOwner`, `leaseExpiresAt`, `fence`; dynamo-session-store.ts) and the relay lease
 * (`relayOwner`, `relayExpiresAt`, `relayFence`; dynamo-relay-store.ts). An owner, an expiry
 * (epoch ms) and a fence that grows with every take and never shrinks. Also the small helpers
 * every store module shares (named condition clauses, condition-failure test, key stripping).
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { GetCommand, UpdateCommand, ConditionalCheckFailedException } from "./dynamodb-sdk";
import { KEY_ATTRIBUTES, keys } from "./table-layout";

/** Builds a ConditionExpression from named clauses so each guarded race has a name. */
export function conditions(clauses: Record<string, string>): string {
  return Object.values(clauses)
    .map((c) => `(${c})`)
    .join(" AND ");
}

export function isConditionFailure(err: unknown): boolean {
  return err instanceof ConditionalCheckFailedException || (err as { name?: string } | null)?.name === "ConditionalCheckFailedException";
}

/**
 * The item a failed conditional write returned (`ReturnValuesOnConditionCheckFailure: ALL_OLD`),
 * as plain values: the document client does not unmarshall an error's `Item`. Undefined when the
 * error carries none (the item does not exist, or a backend such as dynalite ignores the option):
 * the caller reads the item then.
 */
export function conditionFailureItem(err: unknown): Record<string, unknown> | undefined {
  const item = (err as { Item?: unknown } | null)?.Item;
  if (typeof item !== "object" || item === null) return undefined;
  return Object.fromEntries(Object.entries(item as Record<string, unknown>).map(([k, v]) => [k, fromAttributeValue(v)]));
}

/** One DynamoDB AttributeValue (`{S}`, `{N}`, `{BOOL}`, `{NULL}`, `{M}`, `{L}`, `{SS}`, `{NS}`) as a plain value. */
function fromAttributeValue(value: unknown): unknown {
  const v = value as Record<string, unknown>;
  if (typeof v !== "object" || v === null) return value;
  if ("S" in v) return v.S;
  if ("N" in v) return Number(v.N);
  if ("BOOL" in v) return v.BOOL;
  if ("NULL" in v) return null;
  if ("M" in v) return Object.fromEntries(Object.entries(v.M as Record<string, unknown>).map(([k, x]) => [k, fromAttributeValue(x)]));
  if ("L" in v) return (v.L as unknown[]).map(fromAttributeValue);
  if ("SS" in v) return new Set(v.SS as string[]);
  if ("NS" in v) return new Set((v.NS as string[]).map(Number));
  return value;
}

/** The lease attributes of an item as stored. */
export function storedLeaseOf(item: Record<string, unknown>, attrs: LeaseAttributes): StoredLease {
  return {
    owner: typeof item[attrs.owner] === "string" ? (item[attrs.owner] as string) : null,
    fence: typeof item[attrs.fence] === "number" ? (item[attrs.fence] as number) : 0,
    expiresAt: typeof item[attrs.expiresAt] === "number" ? (item[attrs.expiresAt] as number) : null,
  };
}

export function stripKeys(item: Record<string, unknown>): Record<string, unknown> {
  const out = { ...item };
  for (const k of KEY_ATTRIBUTES) delete out[k];
  return out;
}

export interface LeaseAttributes {
  owner: string;
  expiresAt: string;
  fence: string;
}

export interface HeldLease {
  sessionId: string;
  owner: string;
  fence: number;
  expiresAt: number;
}

export interface StoredLease {
  owner: string | null;
  fence: number;
  expiresAt: number | null;
}

export class ItemLease {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly attrs: LeaseAttributes,
  ) {}

  private names(): Record<string, string> {
    return { "#owner": this.attrs.owner, "#expiresAt": this.attrs.expiresAt, "#fence": this.attrs.fence };
  }

  /** Takes the lease if free, expired or already `owner`'s; null when that condition failed (busy or no session). */
  async take(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<HeldLease | null> {
    return (await this.write(sessionId, owner, now, ttlSeconds, { force: false })).lease;
  }

  /**
   * `take`, returning the whole item too (issue 15: the write's `ALL_NEW`, so the caller reads
   * nothing after taking the lease). When the take fails, `item` is the item as it stood
   * (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), or undefined where the backend does not
   * return it (dynalite) or the session does not exist.
   */
  takeReturning(
    sessionId: string,
    owner: string,
    now: Date,
    ttlSeconds: number,
    /** Also seize this other lease of the item (whoever holds it), in the same write, with the same expiry. */
    alsoSeize?: { attrs: LeaseAttributes; owner: string },
  ): Promise<{ lease: HeldLease | null; item: Record<string, unknown> | undefined }> {
    return this.write(sessionId, owner, now, ttlSeconds, { force: false, ...(alsoSeize ? { alsoSeize } : {}) });
  }

  /**
   * Takes the lease whoever holds it (the fence grows, so the holder's next renew fails and it
   * lets go); null only when the session does not exist.
   */
  async seize(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<HeldLease | null> {
    return (await this.write(sessionId, owner, now, ttlSeconds, { force: true })).lease;
  }

  private async write(
    sessionId: string,
    owner: string,
    now: Date,
    ttlSeconds: number,
    opts: { force: boolean; alsoSeize?: { attrs: LeaseAttributes; owner: string } },
  ): Promise<{ lease: HeldLease | null; item: Record<string, unknown> | undefined }> {
    const expiresAt = now.getTime() + Math.round(ttlSeconds * 1000);
    const seize = opts.alsoSeize;
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression:
            "SET #owner = :owner, #expiresAt = :expiresAt, #fence = if_not_exists(#fence, :zero) + :one" +
            (seize ? ", #sOwner = :sOwner, #sExpiresAt = :expiresAt, #sFence = if_not_exists(#sFence, :zero) + :one" : ""),
          ConditionExpression: opts.force
            ? // A take must never create a half session item.
              conditions({ exists: "attribute_exists(PK)" })
            : conditions({
                exists: "attribute_exists(PK)",
                // Two holders must never both believe they own the session: only a free, expired, or
                // already-ours lease can be taken.
                available: "attribute_not_exists(#owner) OR #expiresAt <= :now OR #owner = :owner",
              }),
          ExpressionAttributeNames: seize ? { ...this.names(), "#sOwner": seize.attrs.owner, "#sExpiresAt": seize.attrs.expiresAt, "#sFence": seize.attrs.fence } : this.names(),
          ExpressionAttributeValues: {
            ...(opts.force
              ? { ":owner": owner, ":expiresAt": expiresAt, ":zero": 0, ":one": 1 }
              : { ":owner": owner, ":expiresAt": expiresAt, ":now": now.getTime(), ":zero": 0, ":one": 1 }),
            ...(seize ? { ":sOwner": seize.owner } : {}),
          },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return { lease: { sessionId, owner, fence: Number(out.Attributes?.[this.attrs.fence]), expiresAt }, item: out.Attributes };
    } catch (err) {
      if (isConditionFailure(err)) return { lease: null, item: conditionFailureItem(err) };
      throw err;
    }
  }

  /** Extends a held lease; null when it is no longer the caller's (same owner and fence). */
  async renew<L extends HeldLease>(lease: L, now: Date, ttlSeconds: number): Promise<L | null> {
    const expiresAt = now.getTime() + Math.round(ttlSeconds * 1000);
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(lease.sessionId),
          UpdateExpression: "SET #expiresAt = :expiresAt",
          // Renewing a lease someone else took over would resurrect a lost owner.
          ConditionExpression: conditions({ stillOurs: "#owner = :owner AND #fence = :fence" }),
          ExpressionAttributeNames: this.names(),
          ExpressionAttributeValues: { ":owner": lease.owner, ":fence": lease.fence, ":expiresAt": expiresAt },
        }),
      );
      return { ...lease, expiresAt };
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  /** Frees a held lease; a no-op if it was already released or taken over. The fence stays. */
  async release(lease: Pick<HeldLease, "sessionId" | "owner" | "fence">): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(lease.sessionId),
          UpdateExpression: "REMOVE #owner, #expiresAt",
          // A stale holder must not free the lease its successor holds.
          ConditionExpression: conditions({ stillOurs: "#owner = :owner AND #fence = :fence" }),
          ExpressionAttributeNames: this.names(),
          ExpressionAttributeValues: { ":owner": lease.owner, ":fence": lease.fence },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
  }

  /** The lease as stored (strongly consistent); null when the session does not exist. */
  async read(sessionId: string): Promise<StoredLease | null> {
    const out = await this.doc.send(
      new GetCommand({
        TableName: this.tableName,
        Key: keys.session(sessionId),
        ConsistentRead: true,
        ProjectionExpression: "PK, #owner, #expiresAt, #fence",
        ExpressionAttributeNames: this.names(),
      }),
    );
    if (!out.Item) return null;
    return storedLeaseOf(out.Item, this.attrs);
  }
}
