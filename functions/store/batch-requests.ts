/**
 * BatchGetItem and BatchWriteItem with their partial results retried: DynamoDB may leave keys
 * unprocessed (throttling, a response over 16 MB) and answers them again only when asked. One
 * implementation for every store that batches (org secrets, the org's limits and model, session
 * creation).
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { BatchGetCommand, BatchWriteCommand } from "./dynamodb-sdk";
import { InternalError } from "../domain/errors";

/** BatchGetItem takes at most 100 keys per call. */
export const BATCH_GET_LIMIT = 100;
/** BatchWriteItem takes at most 25 requests per call. */
export const BATCH_WRITE_LIMIT = 25;
/** Unprocessed keys (throttling) are retried with backoff this many times before the request fails. */
const BATCH_ATTEMPTS = 8;

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The items found under `itemKeys` (at most BATCH_GET_LIMIT), strongly consistent, in no
 * particular order. `what` names the items in the error when they stay unprocessed.
 */
export async function batchGetItems(
  doc: DynamoDBDocumentClient,
  tableName: string,
  itemKeys: readonly Record<string, unknown>[],
  what: string,
  projection: { ProjectionExpression?: string; ExpressionAttributeNames?: Record<string, string> } = {},
): Promise<Record<string, unknown>[]> {
  if (itemKeys.length > BATCH_GET_LIMIT) throw new InternalError(`batchGetItems: ${itemKeys.length} keys, at most ${BATCH_GET_LIMIT}`);
  const found: Record<string, unknown>[] = [];
  let pending = [...itemKeys];
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt >= BATCH_ATTEMPTS) throw new InternalError(`${what}: ${pending.length} items stayed unprocessed after ${BATCH_ATTEMPTS} batch reads`);
    if (attempt > 0) await pause(Math.min(1_000, 25 * 2 ** attempt));
    const out = await doc.send(new BatchGetCommand({ RequestItems: { [tableName]: { Keys: pending, ConsistentRead: true, ...projection } } }));
    found.push(...(out.Responses?.[tableName] ?? []));
    pending = out.UnprocessedKeys?.[tableName]?.Keys ?? [];
  }
  return found;
}

/** Puts `items` (at most BATCH_WRITE_LIMIT; unconditional, as BatchWriteItem is), unprocessed ones retried. */
export async function batchPutItems(doc: DynamoDBDocumentClient, tableName: string, items: readonly Record<string, unknown>[], what: string): Promise<void> {
  if (items.length > BATCH_WRITE_LIMIT) throw new InternalError(`batchPutItems: ${items.length} items, at most ${BATCH_WRITE_LIMIT}`);
  let pending: { PutRequest?: { Item: Record<string, unknown> | undefined } }[] = items.map((Item) => ({ PutRequest: { Item } }));
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt >= BATCH_ATTEMPTS) throw new InternalError(`${what}: ${pending.length} writes stayed unprocessed after ${BATCH_ATTEMPTS} batch writes`);
    if (attempt > 0) await pause(Math.min(1_000, 25 * 2 ** attempt));
    const out = await doc.send(new BatchWriteCommand({ RequestItems: { [tableName]: pending as never } }));
    pending = (out.UnprocessedItems?.[tableName] ?? []) as typeof pending;
  }
}
