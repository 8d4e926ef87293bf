/**
 * The persisted transcript (ports/transcript.ts) in the session's partition: one item per agent
 * message, `MSG#<createdAt>#<messageId>` (./table-layout.ts). `upsert` is a plain put on that
 * key, so a relay replaying a finalized message after a takeover replaces it and never adds a
 * second one.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { PutCommand } from "./dynamodb-sdk";
import { TranscriptMessage, type TranscriptStore } from "../ports/transcript";
import { keys } from "./table-layout";
import { listPartitionPage } from "./partition-page";

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

  list(sessionId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: TranscriptMessage[]; nextCursor: string | null }> {
    return listPartitionPage(this.doc, this.tableName, { sessionId, prefix: "MSG#", ...options }, (item) => TranscriptMessage.parse(item));
  }

}
