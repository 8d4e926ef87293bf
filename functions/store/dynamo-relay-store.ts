/**
 * The relay lease (ports/relay.ts) as three attributes of the session item (key layout:
 * ./table-layout.ts): `relayOwner`, `relayExpiresAt` (epoch ms) and `relayFence` (grows with
 * every claim). Separate from the flow lease (`leaseOwner`, `fence`), and never touched by
 * lifecycle writes, which SET named fields only.
 */
import { GetCommand, QueryCommand, UpdateCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { ConditionalCheckFailedException } from "@aws-sdk/client-dynamodb";
import { z } from "zod";
import { LeaseLostError, NotFoundError, ValidationError } from "../domain/errors";
import type { RelayLease, RelayLeaseStore } from "../ports/relay";
import { GSI_BY_STATUS, keys } from "./table-layout";

/** Builds a ConditionExpression from named clauses so each guarded race has a name. */
function conditions(clauses: Record<string, string>): string {
  return Object.values(clauses)
    .map((c) => `(${c})`)
    .join(" AND ");
}

function isConditionFailure(err: unknown): boolean {
  return err instanceof ConditionalCheckFailedException || (err as { name?: string } | null)?.name === "ConditionalCheckFailedException";
}

const ClaimableCursor = z.object({ PK: z.string(), SK: z.string(), GSI2PK: z.string(), GSI2SK: z.string() });

export class DynamoRelayLeaseStore implements RelayLeaseStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async claim(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease | null> {
    const expiresAt = now.getTime() + Math.round(ttlSeconds * 1000);
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: "SET relayOwner = :owner, relayExpiresAt = :expiresAt, relayFence = if_not_exists(relayFence, :zero) + :one",
          ConditionExpression: conditions({
            // A claim must never create a half session item.
            exists: "attribute_exists(PK)",
            // Two relays must never both stream one session (duplicate deltas, two turn completions):
            // only a free, expired, or already-ours relay lease can be taken.
            relayAvailable: "attribute_not_exists(relayOwner) OR relayExpiresAt <= :now OR relayOwner = :owner",
          }),
          ExpressionAttributeValues: { ":owner": owner, ":expiresAt": expiresAt, ":now": now.getTime(), ":zero": 0, ":one": 1 },
          ReturnValues: "UPDATED_NEW",
        }),
      );
      return { sessionId, owner, fence: Number(out.Attributes?.relayFence), expiresAt };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      // Documented outcome: busy is null; only a missing session is an error.
      const exists = await this.doc.send(
        new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true, ProjectionExpression: "PK" }),
      );
      if (!exists.Item) throw new NotFoundError(`session ${sessionId} not found`, { cause: err });
      return null;
    }
  }

  async renew(lease: RelayLease, now: Date, ttlSeconds: number): Promise<RelayLease> {
    const expiresAt = now.getTime() + Math.round(ttlSeconds * 1000);
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(lease.sessionId),
          UpdateExpression: "SET relayExpiresAt = :expiresAt",
          ConditionExpression: conditions({
            // Renewing a lease another relay took over would resurrect a lost owner.
            stillOurs: "relayOwner = :owner AND relayFence = :fence",
          }),
          ExpressionAttributeValues: { ":owner": lease.owner, ":fence": lease.fence, ":expiresAt": expiresAt },
        }),
      );
      return { ...lease, expiresAt };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      throw new LeaseLostError(`session ${lease.sessionId}: relay lease of ${lease.owner} (fence ${lease.fence}) was lost`, {
        cause: err,
        context: { sessionId: lease.sessionId, owner: lease.owner, fence: lease.fence },
      });
    }
  }

  async release(lease: RelayLease): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(lease.sessionId),
          UpdateExpression: "REMOVE relayOwner, relayExpiresAt",
          // A stale relay must not free the lease its successor holds. The fence stays: it only grows.
          ConditionExpression: conditions({ stillOurs: "relayOwner = :owner AND relayFence = :fence" }),
          ExpressionAttributeValues: { ":owner": lease.owner, ":fence": lease.fence },
        }),
      );
    } catch (err) {
      // Documented no-op: already released, or taken over after expiry.
      if (!isConditionFailure(err)) throw err;
    }
  }

  async listClaimable(now: Date, options: { limit: number; cursor?: string | null }): Promise<{ sessionIds: string[]; nextCursor: string | null }> {
    const partition = keys.statusPartition("running");
    let startKey: z.infer<typeof ClaimableCursor> | undefined;
    if (options.cursor) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.from(options.cursor, "base64url").toString("utf8"));
      } catch {
        throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
      }
      const cursor = ClaimableCursor.safeParse(parsed);
      // A cursor from another listing must not steer the query elsewhere.
      if (!cursor.success || cursor.data.GSI2PK !== partition) throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
      startKey = cursor.data;
    }
    const out = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: GSI_BY_STATUS,
        KeyConditionExpression: "GSI2PK = :pk",
        FilterExpression: "attribute_not_exists(relayOwner) OR relayExpiresAt <= :now",
        ProjectionExpression: "id",
        ExpressionAttributeValues: { ":pk": partition, ":now": now.getTime() },
        Limit: options.limit,
        ...(startKey ? { ExclusiveStartKey: startKey } : {}),
      }),
    );
    const sessionIds = (out.Items ?? []).map((i) => i.id).filter((id): id is string => typeof id === "string");
    const last = out.LastEvaluatedKey;
    return { sessionIds, nextCursor: last ? Buffer.from(JSON.stringify(last)).toString("base64url") : null };
  }

  async watched(sessionId: string, now: Date): Promise<boolean> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true, ProjectionExpression: "relayOwner, relayExpiresAt" }),
    );
    const expiresAt = out.Item?.relayExpiresAt;
    return typeof out.Item?.relayOwner === "string" && typeof expiresAt === "number" && expiresAt > now.getTime();
  }
}
