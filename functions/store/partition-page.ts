/**
 * One page of a session partition's items of one kind (`<PREFIX>#...` sort keys), oldest
 * first, with a cursor scoped to that session and kind: a cursor minted for another session or
 * another listing is a `ValidationError`, and the partition always comes from the request.
 * Used by the lifecycle event log and the transcript.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { QueryCommand } from "./dynamodb-sdk";
import * as z from "zod";
import { ValidationError } from "../domain/errors";
import { keys } from "./table-layout";
import { stripKeys } from "./item-lease";

const PageCursor = z.object({ session: z.string(), sk: z.string() });

function invalidCursor(): ValidationError {
  return new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
}

export async function listPartitionPage<T>(
  doc: DynamoDBDocumentClient,
  tableName: string,
  query: { sessionId: string; prefix: string; limit: number; cursor?: string | null | undefined },
  parse: (item: Record<string, unknown>) => T,
): Promise<{ items: T[]; nextCursor: string | null }> {
  let startSk: string | undefined;
  if (query.cursor) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(query.cursor, "base64url").toString("utf8"));
    } catch {
      throw invalidCursor();
    }
    const cursor = PageCursor.safeParse(parsed);
    if (!cursor.success || cursor.data.session !== query.sessionId || !cursor.data.sk.startsWith(query.prefix)) throw invalidCursor();
    startSk = cursor.data.sk;
  }
  const partition = keys.sessionPartition(query.sessionId);
  const out = await doc.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
      ExpressionAttributeValues: { ":pk": partition, ":prefix": query.prefix },
      Limit: query.limit,
      ...(startSk ? { ExclusiveStartKey: { PK: partition, SK: startSk } } : {}),
    }),
  );
  const lastSk = out.LastEvaluatedKey?.SK;
  return {
    items: (out.Items ?? []).map((i) => parse(stripKeys(i))),
    nextCursor: typeof lastSk === "string" ? Buffer.from(JSON.stringify({ session: query.sessionId, sk: lastSk })).toString("base64url") : null,
  };
}
