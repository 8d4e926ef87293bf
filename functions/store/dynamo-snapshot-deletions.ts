/**
 * Pending snapshot deletions (ports/snapshot-deletions.ts) as items of one partition
 * (`SNAPSHOTDELETION`, key layout: ./table-layout.ts). Items exist only between a failed delete
 * and the sweeper's successful retry, so the partition stays small and one Query reads it.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import * as z from "zod";
import { ProviderType } from "../domain/session";
import type { PendingSnapshotDeletion, SnapshotDeletionQueue } from "../ports/snapshot-deletions";
import { DeleteCommand, QueryCommand, UpdateCommand } from "./dynamodb-sdk";
import { keys } from "./table-layout";

const PendingItem = z.object({
  provider: ProviderType,
  snapshotId: z.string().min(1),
  sessionId: z.string().nullable().default(null),
  recordedAt: z.string(),
  lastAttemptAt: z.string(),
  attempts: z.number().int().nonnegative(),
  lastError: z.string().nullable().default(null),
});

export class DynamoSnapshotDeletionQueue implements SnapshotDeletionQueue {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async recordFailure(entry: { provider: ProviderType; snapshotId: string; sessionId: string | null; error: string }, now: Date): Promise<void> {
    const at = now.toISOString();
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: keys.snapshotDeletion(entry.provider, entry.snapshotId),
        UpdateExpression:
          "SET provider = :provider, snapshotId = :snapshotId, sessionId = :sessionId, recordedAt = if_not_exists(recordedAt, :now), lastAttemptAt = :now, lastError = :error ADD attempts :one",
        ExpressionAttributeValues: {
          ":provider": entry.provider,
          ":snapshotId": entry.snapshotId,
          ":sessionId": entry.sessionId,
          ":now": at,
          ":error": entry.error.slice(0, 500),
          ":one": 1,
        },
      }),
    );
  }

  async list(): Promise<PendingSnapshotDeletion[]> {
    const out: PendingSnapshotDeletion[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk",
          ExpressionAttributeValues: { ":pk": keys.snapshotDeletionPartition },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of page.Items ?? []) {
        const parsed = PendingItem.safeParse(item);
        if (parsed.success) out.push(parsed.data);
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }

  async remove(provider: ProviderType, snapshotId: string): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keys.snapshotDeletion(provider, snapshotId) }));
  }
}
