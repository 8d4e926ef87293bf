/**
 * The relay lease (ports/relay.ts) as three attributes of the session item (key layout:
 * ./table-layout.ts): `relayOwner`, `relayExpiresAt` (epoch ms) and `relayFence` (grows with
 * every claim). Separate from the flow lease (`leaseOwner`, `fence`), and never touched by
 * lifecycle writes, which SET named fields only.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { QueryCommand } from "./dynamodb-sdk";
import * as z from "zod";
import { LeaseLostError, NotFoundError, ValidationError } from "../domain/errors";
import type { RelayLease, RelayLeaseStore } from "../ports/relay";
import { ItemLease } from "./item-lease";
import { GSI_BY_STATUS, keys } from "./table-layout";

const ClaimableCursor = z.object({ PK: z.string(), SK: z.string(), GSI2PK: z.string(), GSI2SK: z.string() });

export class DynamoRelayLeaseStore implements RelayLeaseStore {
  private readonly lease: ItemLease;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {
    this.lease = new ItemLease(doc, tableName, { owner: "relayOwner", expiresAt: "relayExpiresAt", fence: "relayFence" });
  }

  async claim(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease | null> {
    // Two relays must never both stream one session (duplicate deltas, two turn completions).
    const lease = await this.lease.take(sessionId, owner, now, ttlSeconds);
    if (lease) return lease;
    // Documented outcome: busy is null; only a missing session is an error.
    if (!(await this.lease.read(sessionId))) throw new NotFoundError(`session ${sessionId} not found`);
    return null;
  }

  async seize(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease> {
    const lease = await this.lease.seize(sessionId, owner, now, ttlSeconds);
    if (!lease) throw new NotFoundError(`session ${sessionId} not found`);
    return lease;
  }

  async renew(lease: RelayLease, now: Date, ttlSeconds: number): Promise<RelayLease> {
    const renewed = await this.lease.renew(lease, now, ttlSeconds);
    if (renewed) return renewed;
    throw new LeaseLostError(`session ${lease.sessionId}: relay lease of ${lease.owner} (fence ${lease.fence}) was lost`, {
      context: { sessionId: lease.sessionId, owner: lease.owner, fence: lease.fence },
    });
  }

  release(lease: RelayLease): Promise<void> {
    return this.lease.release(lease);
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
    const held = await this.lease.read(sessionId);
    return held?.owner !== null && held !== null && (held.expiresAt ?? 0) > now.getTime();
  }

}
