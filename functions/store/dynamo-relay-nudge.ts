/**
 * The relay nudge in AWS (ports/relay.ts `RelayNudge`): a flow (or the prompt path) puts a small
 * item in the `RELAYNUDGE` partition (SK `<ISO time>#<random>`, `sessionId`, `ttl` a day on), and
 * every relay task reads the new ones with one Query per poll (`RELAY_NUDGE_POLL_MS`): per relay,
 * not per session, and an empty answer costs 0.5 RRU. The relay holding the session revalidates
 * it; a running session nobody holds is claimed by whichever relay's conditional claim wins.
 * Locally the nudge is an in-process call instead (infra/local/runtime.ts).
 *
 * Reads overlap the previous window by `OVERLAP_MS` (writers' clocks differ, and a Query is
 * eventually consistent), and items already seen are skipped.
 */
import { randomBytes } from "node:crypto";
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { PutCommand, QueryCommand } from "./dynamodb-sdk";
import type { RelayNudge } from "../ports/relay";
import { TTL_ATTRIBUTE } from "./table-layout";

export const NUDGE_PARTITION = "RELAYNUDGE";
const RETENTION_SECONDS = 86_400;
const OVERLAP_MS = 5_000;

export class DynamoRelayNudge implements RelayNudge {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async nudge(sessionId: string): Promise<void> {
    const at = this.now();
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: { PK: NUDGE_PARTITION, SK: `${at.toISOString()}#${randomBytes(6).toString("hex")}`, sessionId, [TTL_ATTRIBUTE]: Math.ceil(at.getTime() / 1000) + RETENTION_SECONDS },
      }),
    );
  }
}

/** A relay's reader of the nudges written since it started. */
export class RelayNudgeReader {
  /** SK -> epoch ms it was seen; pruned past the overlap. */
  private readonly seen = new Map<string, number>();
  private since: number;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.since = this.now().getTime();
  }

  /** Session ids nudged since the last read (each nudge once). */
  async read(): Promise<string[]> {
    const readAt = this.now().getTime();
    const from = new Date(this.since - OVERLAP_MS).toISOString();
    const ids: string[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND SK > :from",
          ProjectionExpression: "SK, sessionId",
          ExpressionAttributeValues: { ":pk": NUDGE_PARTITION, ":from": from },
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const sk = typeof item.SK === "string" ? item.SK : null;
        if (sk === null || this.seen.has(sk)) continue;
        this.seen.set(sk, readAt);
        if (typeof item.sessionId === "string") ids.push(item.sessionId);
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    this.since = readAt;
    for (const [sk, at] of this.seen) if (at < readAt - 2 * OVERLAP_MS) this.seen.delete(sk);
    return ids;
  }
}
