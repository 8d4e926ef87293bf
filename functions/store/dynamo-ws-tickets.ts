/**
 * WebSocket connect tickets over the single table (`WSTICKET#<sha256>`, ./table-layout.ts).
 * Consuming is one conditional write, so a ticket opens at most one connection however many
 * connects race with it. A used ticket stays (marked `consumedAt`) until `ttl` (epoch seconds,
 * for the table's TTL) so a replay is refused rather than unknown.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { PutCommand, UpdateCommand } from "./dynamodb-sdk";
import * as z from "zod";
import { ROLES } from "../domain/principal";
import type { WsTicketGrant, WsTicketStore } from "../ports/ws-tickets";
import { hashToken } from "./dynamo-session-store";
import { isConditionFailure } from "./item-lease";
import { keys } from "./table-layout";

const StoredGrant = z.object({
  sessionId: z.string().min(1),
  userId: z.string().min(1),
  orgId: z.string().min(1),
  role: z.enum(ROLES),
  tokenHash: z.string().nullable(),
  expiresAt: z.iso.datetime(),
});

/** Ticket items are kept this long past their expiry, then the table's TTL may drop them. */
const KEEP_AFTER_EXPIRY_SECONDS = 3600;

export class DynamoWsTicketStore implements WsTicketStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async issue(ticket: string, grant: WsTicketGrant, now: Date): Promise<void> {
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          ...keys.wsTicket(hashToken(ticket)),
          ...StoredGrant.parse(grant),
          createdAt: now.toISOString(),
          ttl: Math.ceil(Date.parse(grant.expiresAt) / 1000) + KEEP_AFTER_EXPIRY_SECONDS,
        },
        // 256 random bits never collide; this only keeps a replayed issue from reviving a used ticket.
        ConditionExpression: "attribute_not_exists(PK)",
      }),
    );
  }

  async consume(ticket: string, now: Date): Promise<WsTicketGrant | null> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.wsTicket(hashToken(ticket)),
          UpdateExpression: "SET consumedAt = :now",
          ConditionExpression: [
            // Never create an item for a ticket nobody issued.
            "attribute_exists(PK)",
            // Single use: a replay, or the loser of two racing connects, finds it consumed.
            "attribute_not_exists(consumedAt)",
          ].join(" AND "),
          ExpressionAttributeValues: { ":now": now.toISOString() },
          ReturnValues: "ALL_NEW",
        }),
      );
      const parsed = StoredGrant.safeParse(out.Attributes);
      return parsed.success ? parsed.data : null;
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }
}
