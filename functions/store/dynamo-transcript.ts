/**
 * The persisted transcript (ports/transcript.ts) in the session's partition: one item per agent
 * message, `MSG#<createdAt>#<messageId>` (./table-layout.ts). `upsert` is a plain put on that
 * key, so a relay replaying a finalized message after a takeover replaces it and never adds a
 * second one.
 */
import { PutCommand, QueryCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { z } from "zod";
import { ValidationError } from "../domain/errors";
import { TranscriptMessage, type TranscriptStore } from "../ports/transcript";
import { KEY_ATTRIBUTES, keys } from "./table-layout";

function stripKeys(item: Record<string, unknown>): Record<string, unknown> {
  const out = { ...item };
  for (const k of KEY_ATTRIBUTES) delete out[k];
  return out;
}

const MessageCursor = z.object({ session: z.string(), sk: z.string().startsWith("MSG#") });

function invalidCursor(): ValidationError {
  return new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
}

export class DynamoTranscriptStore implements TranscriptStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async upsert(message: TranscriptMessage): Promise<void> {
    const stored = TranscriptMessage.parse(message);
    await this.doc.send(
      new PutCommand({ TableName: this.tableName, Item: { ...keys.message(stored.sessionId, stored.createdAt, stored.messageId), ...stored } }),
    );
  }

  async list(sessionId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: TranscriptMessage[]; nextCursor: string | null }> {
    let startSk: string | undefined;
    if (options.cursor) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.from(options.cursor, "base64url").toString("utf8"));
      } catch {
        throw invalidCursor();
      }
      const cursor = MessageCursor.safeParse(parsed);
      // A cursor minted for another session's transcript must not position this one.
      if (!cursor.success || cursor.data.session !== sessionId) throw invalidCursor();
      startSk = cursor.data.sk;
    }
    const partition = keys.sessionPartition(sessionId);
    const out = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
        ExpressionAttributeValues: { ":pk": partition, ":prefix": "MSG#" },
        Limit: options.limit,
        // The partition always comes from the request, never from the cursor.
        ...(startSk ? { ExclusiveStartKey: { PK: partition, SK: startSk } } : {}),
      }),
    );
    const items = (out.Items ?? []).map((i) => TranscriptMessage.parse(stripKeys(i)));
    const lastSk = out.LastEvaluatedKey?.SK;
    return {
      items,
      nextCursor: typeof lastSk === "string" ? Buffer.from(JSON.stringify({ session: sessionId, sk: lastSk })).toString("base64url") : null,
    };
  }
}
