/**
 * Automations' items (API.md "Automations"; functions/ports/automations.ts) in the single table:
 *
 * | item               | PK                         | SK                                | 
 * |--------------------|----------------------------|-----------------------------------|
 * | definition         | `ORG#<orgId>`              | `AUTOMATION#<automationId>`       |
 * | run                | `AUTOMATION#<automationId>`| `RUN#<scheduledAt>#<runId>`       |
 * | webhook key        | `AUTOMATION#<automationId>`| `WEBHOOKKEY#<sha256(key)>`        | (the run's id and scheduledAt; `ttl`: 7 days)
 *
 * Access patterns: an org's automations: Query `ORG#org` begins_with `AUTOMATION#`; an
 * automation's runs newest first: Query `AUTOMATION#id` begins_with `RUN#`, ScanIndexForward
 * false (ISO times sort as strings). A scheduled firing's run id is derived from the firing
 * (automation.ts `firingRunId`), so its put `attribute_not_exists(PK)` is the dedupe: a firing
 * delivered twice is one run.
 */
import { createHash } from "node:crypto";
import * as z from "zod";
import type { AutomationRecord, RunEnd, RunRecord } from "../automations/automation";
import { AUTO_DISABLE_AFTER, disabledReasonAfterFailures } from "../automations/automation";
import { ValidationError } from "../domain/errors";
import type { AutomationStore, WebhookKeyRun } from "../ports/automations";
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from "./dynamodb-sdk";
import { isConditionFailure, stripKeys } from "./item-lease";

const k = {
  automation: (orgId: string, id: string) => ({ PK: `ORG#${orgId}`, SK: `AUTOMATION#${id}` }),
  run: (automationId: string, scheduledAt: string, runId: string) => ({ PK: `AUTOMATION#${automationId}`, SK: `RUN#${scheduledAt}#${runId}` }),
  webhookKey: (automationId: string, key: string) => ({ PK: `AUTOMATION#${automationId}`, SK: `WEBHOOKKEY#${createHash("sha256").update(key).digest("hex")}` }),
};

const Cursor = z.object({ p: z.string(), sk: z.string() });

function encodeCursor(partition: string, sk: unknown): string | null {
  return typeof sk === "string" ? Buffer.from(JSON.stringify({ p: partition, sk })).toString("base64url") : null;
}

function decodeCursor(cursor: string | null | undefined, partition: string, prefix: string): string | undefined {
  if (!cursor) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    parsed = null;
  }
  const c = Cursor.safeParse(parsed);
  if (!c.success || c.data.p !== partition || !c.data.sk.startsWith(prefix)) throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
  return c.data.sk;
}

export class DynamoAutomationStore implements AutomationStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async create(record: AutomationRecord): Promise<boolean> {
    try {
      // Ids are random: a clash means the same create ran twice.
      await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...k.automation(record.orgId, record.id), ...record }, ConditionExpression: "attribute_not_exists(PK)" }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async get(orgId: string, id: string, consistent = false): Promise<AutomationRecord | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: k.automation(orgId, id), ConsistentRead: consistent }));
    return out.Item ? (stripKeys(out.Item) as unknown as AutomationRecord) : null;
  }

  async list(orgId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: AutomationRecord[]; nextCursor: string | null }> {
    const pk = `ORG#${orgId}`;
    const start = decodeCursor(options.cursor, pk, "AUTOMATION#");
    const out = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
        ExpressionAttributeValues: { ":pk": pk, ":prefix": "AUTOMATION#" },
        Limit: options.limit,
        ...(start ? { ExclusiveStartKey: { PK: pk, SK: start } } : {}),
      }),
    );
    return { items: (out.Items ?? []).map((i) => stripKeys(i) as unknown as AutomationRecord), nextCursor: encodeCursor(pk, out.LastEvaluatedKey?.SK) };
  }

  async update(orgId: string, id: string, fields: Partial<AutomationRecord>, expectedUpdatedAt: string): Promise<AutomationRecord | null> {
    const names: Record<string, string> = { "#updatedAt": "updatedAt" };
    const values: Record<string, unknown> = { ":expected": expectedUpdatedAt };
    const sets: string[] = [];
    Object.entries(fields).forEach(([name, value], i) => {
      names[`#f${i}`] = name;
      values[`:v${i}`] = value ?? null;
      sets.push(`#f${i} = :v${i}`);
    });
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: k.automation(orgId, id),
          UpdateExpression: `SET ${sets.join(", ")}`,
          // A concurrent PATCH (or the auto-disable) changed it since it was read: the caller re-reads.
          ConditionExpression: "attribute_exists(PK) AND #updatedAt = :expected",
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes ? (stripKeys(out.Attributes) as unknown as AutomationRecord) : null;
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  async delete(orgId: string, id: string): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: k.automation(orgId, id) }));
  }

  async putRun(run: RunRecord): Promise<boolean> {
    try {
      // The dedupe of a firing delivered twice (Scheduler's at-least-once delivery, a retried invoke).
      await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...k.run(run.automationId, run.scheduledAt, run.id), ...run }, ConditionExpression: "attribute_not_exists(PK)" }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async getRun(automationId: string, scheduledAt: string, runId: string): Promise<RunRecord | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: k.run(automationId, scheduledAt, runId), ConsistentRead: true }));
    return out.Item ? (stripKeys(out.Item) as unknown as RunRecord) : null;
  }

  async runStarted(run: RunRecord, sessionId: string): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: k.run(run.automationId, run.scheduledAt, run.id),
          UpdateExpression: "SET #status = :running, sessionId = :session",
          // A run that already ended (its session failed fast) stays ended.
          ConditionExpression: "#status = :starting",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":running": "running", ":starting": "starting", ":session": sessionId },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async endRun(run: Pick<RunRecord, "automationId" | "scheduledAt" | "id">, end: RunEnd, at: Date, detail: { summary?: string; error?: string }): Promise<RunRecord | null> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: k.run(run.automationId, run.scheduledAt, run.id),
          UpdateExpression: "SET #status = :end, endedAt = :at, summary = :summary, #error = :error",
          // The first end wins: the turn's completion, the session's error and the timeout may race.
          ConditionExpression: "#status IN (:starting, :running)",
          ExpressionAttributeNames: { "#status": "status", "#error": "error" },
          ExpressionAttributeValues: { ":end": end, ":at": at.toISOString(), ":summary": detail.summary ?? null, ":error": detail.error ?? null, ":starting": "starting", ":running": "running" },
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes ? (stripKeys(out.Attributes) as unknown as RunRecord) : null;
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  async listRuns(automationId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: RunRecord[]; nextCursor: string | null }> {
    const pk = `AUTOMATION#${automationId}`;
    const start = decodeCursor(options.cursor, pk, "RUN#");
    const out = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
        ExpressionAttributeValues: { ":pk": pk, ":prefix": "RUN#" },
        ScanIndexForward: false,
        Limit: options.limit,
        ...(start ? { ExclusiveStartKey: { PK: pk, SK: start } } : {}),
      }),
    );
    return { items: (out.Items ?? []).map((i) => stripKeys(i) as unknown as RunRecord), nextCursor: encodeCursor(pk, out.LastEvaluatedKey?.SK) };
  }

  async setActiveRun(orgId: string, automationId: string, active: { runId: string; scheduledAt: string } | null, expectRunId?: string): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: k.automation(orgId, automationId),
          UpdateExpression: active ? "SET activeRun = :active, lastRunAt = :at" : "SET activeRun = :active",
          // Clearing: only the run that is still the current one (a newer run may have replaced it).
          ConditionExpression: expectRunId ? "attribute_exists(PK) AND activeRun.runId = :expect" : "attribute_exists(PK)",
          ExpressionAttributeValues: { ":active": active, ...(active ? { ":at": active.scheduledAt } : {}), ...(expectRunId ? { ":expect": expectRunId } : {}) },
        }),
      );
    } catch (err) {
      // Deleted meanwhile, or another run is current: nothing to do.
      if (!isConditionFailure(err)) throw err;
    }
  }

  async recordRunEnd(orgId: string, automationId: string, end: RunEnd, at: Date): Promise<AutomationRecord | null> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: k.automation(orgId, automationId),
          UpdateExpression: end === "succeeded" ? "SET consecutiveFailures = :zero" : "ADD consecutiveFailures :one",
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: end === "succeeded" ? { ":zero": 0 } : { ":one": 1 },
          ReturnValues: "ALL_NEW",
        }),
      );
      const after = out.Attributes ? (stripKeys(out.Attributes) as unknown as AutomationRecord) : null;
      if (!after || after.consecutiveFailures < AUTO_DISABLE_AFTER || !after.enabled) return after;
      const disabled = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: k.automation(orgId, automationId),
          UpdateExpression: "SET enabled = :false, disabledReason = :reason, updatedAt = :at",
          // Only while the streak stands (a success in between reset it).
          ConditionExpression: "consecutiveFailures >= :limit",
          ExpressionAttributeValues: { ":false": false, ":reason": disabledReasonAfterFailures(after.consecutiveFailures), ":at": at.toISOString(), ":limit": AUTO_DISABLE_AFTER },
          ReturnValues: "ALL_NEW",
        }),
      );
      return disabled.Attributes ? (stripKeys(disabled.Attributes) as unknown as AutomationRecord) : after;
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  /**
   * Every enabled automation of every org: a Scan, for the local runtime re-arming its timers
   * after a DATA_DIR restart (in AWS the schedules live in Scheduler; nothing there calls this).
   */
  async scanEnabled(): Promise<AutomationRecord[]> {
    const found: AutomationRecord[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: "begins_with(PK, :org) AND begins_with(SK, :automation) AND enabled = :true",
          ExpressionAttributeValues: { ":org": "ORG#", ":automation": "AUTOMATION#", ":true": true },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      found.push(...(out.Items ?? []).map((i) => stripKeys(i) as unknown as AutomationRecord));
      start = out.LastEvaluatedKey;
    } while (start);
    return found;
  }

  async claimWebhookKey(automationId: string, key: string, run: WebhookKeyRun, at: Date): Promise<{ fresh: boolean; run: WebhookKeyRun }> {
    const item = { ...k.webhookKey(automationId, key), runId: run.runId, scheduledAt: run.scheduledAt, createdAt: at.toISOString(), ttl: Math.floor(at.getTime() / 1000) + 7 * 86_400 };
    try {
      await this.doc.send(new PutCommand({ TableName: this.tableName, Item: item, ConditionExpression: "attribute_not_exists(PK)" }));
      return { fresh: true, run };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const bound = await this.getWebhookKey(automationId, key);
      // Released between the put and the read (its run never started): claim it again.
      return bound ? { fresh: false, run: bound } : this.claimWebhookKey(automationId, key, run, at);
    }
  }

  async getWebhookKey(automationId: string, key: string): Promise<WebhookKeyRun | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: k.webhookKey(automationId, key), ConsistentRead: true }));
    if (!out.Item) return null;
    return { runId: String(out.Item.runId), scheduledAt: String(out.Item.scheduledAt ?? "") };
  }

  async releaseWebhookKey(automationId: string, key: string, runId: string): Promise<void> {
    try {
      await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: k.webhookKey(automationId, key), ConditionExpression: "runId = :run", ExpressionAttributeValues: { ":run": runId } }));
    } catch (err) {
      // Gone already, or another claim's: nothing of ours to release.
      if (!isConditionFailure(err)) throw err;
    }
  }
}
