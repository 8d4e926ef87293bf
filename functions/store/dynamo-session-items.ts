/**
 * Prompt queue, lifecycle audit log and connection registry over the single table
 * (key layout: ./table-layout.ts). Prompt state changes are conditional writes, so two
 * dispatchers can never both send the same prompt.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { METRIC_NAMES, type MetricsSink } from "../ports/metrics-sink";
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from "./dynamodb-sdk";
import { isLiveConnection, ttlEpochSeconds } from "../domain/connection-liveness";
import { newSortableId } from "../domain/ids";
import {
  ClientConnection,
  LifecycleEvent,
  ProxyConnection,
  type ProxyConnectionRegistry,
  QueuedPrompt,
  type ConnectionRegistry,
  type LifecycleEventLog,
  type PromptQueue,
  type PromptFailure,
  type PromptStatus,
} from "../ports/session-items";
import { keys, TTL_ATTRIBUTE } from "./table-layout";
import { isConditionFailure, stripKeys } from "./item-lease";
import { listPartitionPage } from "./partition-page";

/** Reads every item of a session partition whose SK starts with `prefix`, in SK order. */
async function queryAll(doc: DynamoDBDocumentClient, tableName: string, sessionId: string, prefix: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const out = await doc.send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
        ExpressionAttributeValues: { ":pk": keys.sessionPartition(sessionId), ":prefix": prefix },
        ConsistentRead: true,
        ...(startKey ? { ExclusiveStartKey: startKey } : {}),
      }),
    );
    items.push(...(out.Items ?? []));
    startKey = out.LastEvaluatedKey;
  } while (startKey);
  return items;
}

/** Queued and processing prompts (the open range); finished ones are relocated under FINISHED_PROMPT_PREFIX. */
const PROMPT_PREFIX = "PROMPT#";
const FINISHED_PROMPT_PREFIX = "PROMPTDONE#";
/** Finished prompts a read of the open range relocates at most (each a put and a delete). */
const RELOCATIONS_PER_READ = 25;

function isFinished(status: PromptStatus): boolean {
  return status === "completed" || status === "failed";
}

/** Queue order: the sort key's (`createdAt`, then id). */
function inQueueOrder(prompts: QueuedPrompt[]): QueuedPrompt[] {
  const key = (p: QueuedPrompt) => `${p.createdAt}#${p.promptId}`;
  return prompts.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** `a` and `b` with one prompt per id (`b`'s copy kept): a relocation between two reads lists a prompt in both ranges. */
function byId(a: QueuedPrompt[], b: QueuedPrompt[]): QueuedPrompt[] {
  const ids = new Set(b.map((p) => p.promptId));
  return [...a.filter((p) => !ids.has(p.promptId)), ...b];
}

/**
 * The queue of a session in two key ranges, so the reads that run on every prompt and turn do
 * not grow with the session's history: queued and processing prompts under `PROMPT#`, finished
 * ones (completed, failed) under `PROMPTDONE#`. A move to a finished status is decided by the
 * one conditional write, as before; the prompt is then relocated (put, then deleted from the
 * open range). Before, every read of the queue read every prompt the session ever had (twice
 * per turn: a session's cost grew with the square of its prompts).
 */
export class DynamoPromptQueue implements PromptQueue {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    /** PromptQueueWait (issue 19): accepted -> taken for delivery, published by the queued -> processing move that wins. */
    private readonly metrics?: MetricsSink,
  ) {}

  async enqueue(input: { sessionId: string; content: string; source: string; now: Date }): Promise<QueuedPrompt> {
    const at = input.now.toISOString();
    const prompt: QueuedPrompt = {
      promptId: newSortableId("prm", input.now),
      sessionId: input.sessionId,
      content: input.content,
      status: "queued",
      source: input.source,
      createdAt: at,
      updatedAt: at,
    };
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: { ...keys.prompt(prompt.sessionId, prompt.createdAt, prompt.promptId), ...prompt },
        ConditionExpression: "attribute_not_exists(PK)",
      }),
    );
    return prompt;
  }

  async enqueueOnce(input: { sessionId: string; promptId: string; content: string; source: string; now: Date }): Promise<{ prompt: QueuedPrompt; fresh: boolean }> {
    // The key item comes first and fixes the prompt's createdAt (its sort key); the prompt item is
    // then put under that key, conditionally. A crash between the two leaves the key item: the
    // repeat reads its createdAt and puts the same prompt item, so nothing is lost or doubled.
    const keyItem = keys.promptKey(input.sessionId, input.promptId);
    let createdAt = input.now.toISOString();
    try {
      await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...keyItem, promptId: input.promptId, createdAt }, ConditionExpression: "attribute_not_exists(PK)" }));
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const found = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keyItem, ConsistentRead: true }));
      if (typeof found.Item?.createdAt !== "string") throw new Error(`prompt key ${input.promptId} has no createdAt`, { cause: err });
      createdAt = found.Item.createdAt;
      // A repeat after the prompt finished: it left the open range, where the put below would
      // store it again. (A relocation puts the finished copy before it deletes the open one.)
      const finished = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.finishedPrompt(input.sessionId, createdAt, input.promptId), ConsistentRead: true }));
      if (finished.Item) return { prompt: QueuedPrompt.parse(stripKeys(finished.Item)), fresh: false };
    }
    const prompt: QueuedPrompt = { promptId: input.promptId, sessionId: input.sessionId, content: input.content, status: "queued", source: input.source, createdAt, updatedAt: createdAt };
    try {
      await this.doc.send(
        new PutCommand({ TableName: this.tableName, Item: { ...keys.prompt(input.sessionId, createdAt, input.promptId), ...prompt }, ConditionExpression: "attribute_not_exists(PK)" }),
      );
      return { prompt, fresh: true };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
    const stored = await this.getKeyed(input.sessionId, input.promptId);
    if (!stored) throw new Error(`prompt ${input.promptId} exists but could not be read`);
    return { prompt: stored, fresh: false };
  }

  async getKeyed(sessionId: string, promptId: string): Promise<QueuedPrompt | null> {
    const key = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.promptKey(sessionId, promptId), ConsistentRead: true }));
    if (typeof key.Item?.createdAt !== "string") return null;
    const createdAt = key.Item.createdAt;
    const get = async (at: typeof keys.prompt) => (await this.doc.send(new GetCommand({ TableName: this.tableName, Key: at(sessionId, createdAt, promptId), ConsistentRead: true }))).Item;
    // Open, else finished (a relocation puts the finished copy before it deletes the open one).
    const item = (await get(keys.prompt)) ?? (await get(keys.finishedPrompt));
    return item ? QueuedPrompt.parse(stripKeys(item)) : null;
  }

  async list(sessionId: string, status?: PromptStatus): Promise<QueuedPrompt[]> {
    // The open range is read whatever the status: a finished prompt still in it (see `readOpen`) is listed as finished.
    const [open, finished] = await Promise.all([this.readOpen(sessionId), status === undefined || isFinished(status) ? this.readFinished(sessionId) : []]);
    const prompts = inQueueOrder([...open.open, ...byId(open.finished, finished)]);
    return status ? prompts.filter((p) => p.status === status) : prompts;
  }

  async listOpen(sessionId: string): Promise<QueuedPrompt[]> {
    return (await this.readOpen(sessionId)).open;
  }

  /**
   * The open range (`PROMPT#`): the queued and processing prompts, and any finished one a move
   * did not relocate (it stopped between its two writes, or the prompt was finished before the
   * two ranges existed). Those are relocated now, RELOCATIONS_PER_READ at a time (a session with
   * a long history from before moves over a few reads, not in one burst of writes), so the range
   * comes down to the queue.
   */
  private async readOpen(sessionId: string): Promise<{ open: QueuedPrompt[]; finished: QueuedPrompt[] }> {
    const prompts = (await queryAll(this.doc, this.tableName, sessionId, PROMPT_PREFIX)).map((i) => QueuedPrompt.parse(stripKeys(i)));
    const finished = prompts.filter((p) => isFinished(p.status));
    await Promise.all(finished.slice(0, RELOCATIONS_PER_READ).map((p) => this.relocate(p)));
    return { open: prompts.filter((p) => !isFinished(p.status)), finished };
  }

  private async readFinished(sessionId: string): Promise<QueuedPrompt[]> {
    return (await queryAll(this.doc, this.tableName, sessionId, FINISHED_PROMPT_PREFIX)).map((i) => QueuedPrompt.parse(stripKeys(i)));
  }

  /**
   * A finished prompt to the finished range: put there (the same item again if a relocation ran
   * before), then deleted from the open range if it is still finished there. Best effort: a
   * failure leaves it in the open range, where the next read relocates it.
   */
  private async relocate(prompt: QueuedPrompt): Promise<void> {
    try {
      await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...keys.finishedPrompt(prompt.sessionId, prompt.createdAt, prompt.promptId), ...prompt } }));
      await this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: keys.prompt(prompt.sessionId, prompt.createdAt, prompt.promptId),
          ConditionExpression: "#status = :status",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":status": prompt.status },
        }),
      );
    } catch {
      // Best effort: a failed write (throttled; the delete's condition, when another read
      // relocated it first; a caller that may only read, such as the idle check's schedule
      // target) leaves the prompt where the next read of the open range finds it.
    }
  }

  async move(
    prompt: Pick<QueuedPrompt, "sessionId" | "promptId" | "createdAt">,
    from: PromptStatus,
    to: PromptStatus,
    now: Date,
    changes: { failure?: PromptFailure } = {},
  ): Promise<boolean> {
    // A finished prompt never moves again (nothing moves one back: a retry is a new prompt).
    if (isFinished(from)) return false;
    const failure = changes.failure ? { ":failure": changes.failure } : {};
    let moved: Record<string, unknown> | undefined;
    try {
      ({ Attributes: moved } = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.prompt(prompt.sessionId, prompt.createdAt, prompt.promptId),
          UpdateExpression: changes.failure ? "SET #status = :to, updatedAt = :now, failure = :failure" : "SET #status = :to, updatedAt = :now",
          // Exactly one actor wins each move: a second dispatcher sees 0 items affected.
          ConditionExpression: "attribute_exists(PK) AND #status = :from",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":from": from, ":to": to, ":now": now.toISOString(), ...failure },
          ...(isFinished(to) ? { ReturnValues: "ALL_NEW" as const } : {}),
        }),
      ));
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
    if (from === "queued" && to === "processing") this.metrics?.put(METRIC_NAMES.promptQueueWait, Math.max(0, now.getTime() - Date.parse(prompt.createdAt)), "Milliseconds");
    // The move is decided (the write above): the finished prompt leaves the open range.
    if (moved) await this.relocate(QueuedPrompt.parse(stripKeys(moved)));
    return true;
  }
}


export class DynamoLifecycleEventLog implements LifecycleEventLog {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async append(event: LifecycleEvent): Promise<LifecycleEvent> {
    const stored = LifecycleEvent.parse(event);
    await this.doc.send(
      new PutCommand({ TableName: this.tableName, Item: { ...keys.event(stored.sessionId, stored.at, stored.eventId), ...stored } }),
    );
    return stored;
  }

  list(sessionId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: LifecycleEvent[]; nextCursor: string | null }> {
    return listPartitionPage(this.doc, this.tableName, { sessionId, prefix: "EVENT#", ...options }, (item) => LifecycleEvent.parse(item));
  }

  async findByExecution(sessionId: string, execution: string, notBefore: Date): Promise<LifecycleEvent | null> {
    // Events sort by their time: only the window since `notBefore` is read, not the whole log.
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND SK BETWEEN :from AND :to",
          FilterExpression: "eventId = :eventId",
          ConsistentRead: true,
          ExpressionAttributeValues: { ":pk": keys.sessionPartition(sessionId), ":from": `EVENT#${notBefore.toISOString()}`, ":to": "EVENT#\uffff", ":eventId": execution },
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      const item = out.Items?.[0];
      if (item) return LifecycleEvent.parse(stripKeys(item));
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return null;
  }

}

export class DynamoConnectionRegistry implements ConnectionRegistry {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async add(input: ClientConnection): Promise<void> {
    const connection = ClientConnection.parse(input);
    // DynamoDB deletes the items some time after they expire; readers check `expiresAt` themselves.
    const ttl = connection.expiresAt ? { [TTL_ATTRIBUTE]: ttlEpochSeconds(connection.expiresAt) } : {};
    // Lookup item first: a connection listed in the session is always resolvable by id.
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...keys.connectionLookup(connection.connectionId), ...connection, ...ttl } }));
    await this.doc.send(
      new PutCommand({ TableName: this.tableName, Item: { ...keys.connection(connection.sessionId, connection.connectionId), ...connection, ...ttl } }),
    );
  }

  async remove(sessionId: string, connectionId: string): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keys.connection(sessionId, connectionId) }));
    // Only this session's lookup: the same id can never belong to two sessions, but be exact.
    await this.doc.send(
      new DeleteCommand({
        TableName: this.tableName,
        Key: keys.connectionLookup(connectionId),
        ConditionExpression: "attribute_not_exists(PK) OR sessionId = :sessionId",
        ExpressionAttributeValues: { ":sessionId": sessionId },
      }),
    ).catch((err: unknown) => {
      if (!isConditionFailure(err)) throw err;
    });
  }

  async markReady(sessionId: string, connectionId: string, expiresAt?: Date): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.connection(sessionId, connectionId),
          UpdateExpression: expiresAt ? "SET ready = :true, expiresAt = :exp, #ttl = :ttl" : "SET ready = :true",
          // A connection that already left must not be resurrected as a half item.
          ConditionExpression: "attribute_exists(PK)",
          ...(expiresAt ? { ExpressionAttributeNames: { "#ttl": TTL_ATTRIBUTE } } : {}),
          ExpressionAttributeValues: { ":true": true, ...(expiresAt ? { ":exp": expiresAt.toISOString(), ":ttl": ttlEpochSeconds(expiresAt) } : {}) },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
    if (expiresAt) await this.refreshLookup(sessionId, connectionId, expiresAt);
    return true;
  }

  async refresh(sessionId: string, connectionId: string, expiresAt: Date): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.connection(sessionId, connectionId),
          UpdateExpression: "SET expiresAt = :exp, #ttl = :ttl",
          // A connection that already left (or was pruned) must not be resurrected as a half item.
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeNames: { "#ttl": TTL_ATTRIBUTE },
          ExpressionAttributeValues: { ":exp": expiresAt.toISOString(), ":ttl": ttlEpochSeconds(expiresAt) },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
    await this.refreshLookup(sessionId, connectionId, expiresAt);
    return true;
  }

  /** The lookup item expires with the session's item, so frames resolve exactly as long as the connection counts. */
  private async refreshLookup(sessionId: string, connectionId: string, expiresAt: Date): Promise<void> {
    await this.doc
      .send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.connectionLookup(connectionId),
          UpdateExpression: "SET expiresAt = :exp, #ttl = :ttl",
          // Only this session's lookup, and never re-created once removed.
          ConditionExpression: "attribute_exists(PK) AND sessionId = :sessionId",
          ExpressionAttributeNames: { "#ttl": TTL_ATTRIBUTE },
          ExpressionAttributeValues: { ":exp": expiresAt.toISOString(), ":ttl": ttlEpochSeconds(expiresAt), ":sessionId": sessionId },
        }),
      )
      .catch((err: unknown) => {
        if (!isConditionFailure(err)) throw err;
      });
  }

  async lookup(connectionId: string): Promise<ClientConnection | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.connectionLookup(connectionId) }));
    return out.Item ? ClientConnection.parse(stripKeys(out.Item)) : null;
  }

  async list(sessionId: string): Promise<ClientConnection[]> {
    const items = await queryAll(this.doc, this.tableName, sessionId, "CONN#");
    return items.map((i) => ClientConnection.parse(stripKeys(i)));
  }

  async listLive(sessionId: string, now: Date): Promise<ClientConnection[]> {
    return (await this.list(sessionId)).filter((c) => isLiveConnection(c, now));
  }
}

export class DynamoProxyConnectionRegistry implements ProxyConnectionRegistry {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async put(input: ProxyConnection): Promise<void> {
    const connection = ProxyConnection.parse(input);
    // Idempotent by id: a refresh keeps the first `openedAt` and takes the new expiry.
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: keys.proxy(connection.sessionId, connection.proxyId),
        UpdateExpression: "SET proxyId = :id, sessionId = :sid, kind = :kind, openedAt = if_not_exists(openedAt, :opened), expiresAt = :exp, #ttl = :ttl",
        ExpressionAttributeNames: { "#ttl": TTL_ATTRIBUTE },
        ExpressionAttributeValues: {
          ":ttl": ttlEpochSeconds(connection.expiresAt),
          ":id": connection.proxyId,
          ":sid": connection.sessionId,
          ":kind": connection.kind,
          ":opened": connection.openedAt,
          ":exp": connection.expiresAt,
        },
      }),
    );
  }

  async remove(sessionId: string, proxyId: string): Promise<boolean> {
    const out = await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keys.proxy(sessionId, proxyId), ReturnValues: "ALL_OLD" }));
    return Boolean(out.Attributes);
  }

  async listLive(sessionId: string, now: Date): Promise<ProxyConnection[]> {
    const items = await queryAll(this.doc, this.tableName, sessionId, "PROXY#");
    const at = now.toISOString();
    return items.map((i) => ProxyConnection.parse(stripKeys(i))).filter((p) => p.expiresAt > at);
  }
}
