/**
 * Repositories, prebuilds and builds over DynamoDB (dynalite locally). Key layout (table-layout.ts
 * conventions, the org's own partition):
 *
 * | item     | PK           | SK                              | GSI2                               |
 * |----------|--------------|---------------------------------|------------------------------------|
 * | repo     | `ORG#<org>`  | `REPO#<repoId>`                 | -                                  |
 * | prebuild | `ORG#<org>`  | `PREBUILD#<prebuildId>`         | `PREBUILDS` / `<prebuildId>` (the scheduled rebuild lists all) |
 * | build    | `ORG#<org>`  | `BUILD#<targetId>#<buildId>`    | -                                  |
 * | build locator | `BUILDREF#<buildId>` | `BUILDREF`          | -                                  |
 *
 * Build ids are time-ordered, so a target's builds read newest first with one Query. A build
 * sandbox knows only its build id: the locator (org and target, written with the build, `ttl` a
 * day after it is written: far past BUILD_MAX_RUNNING_SECONDS) finds the build from it.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from "./dynamodb-sdk";
import type { ServiceCommand } from "../domain/agent-settings";
import { BuildRecord, BuildTarget, BuiltSnapshot, PrebuildRecord, RepoRecord, type BuildSummary } from "../domain/repos-prebuilds";
import type { BuildOutcome, PrebuildChanges, RecordSnapshotResult, RepoCatalog, RepoChanges } from "../ports/repo-catalog";
import { GSI_BY_STATUS, TTL_ATTRIBUTE, keys } from "./table-layout";
import { isConditionFailure, stripKeys } from "./item-lease";

const PREBUILDS_INDEX_PARTITION = "PREBUILDS";

const repoKey = (orgId: string, repoId: string) => ({ PK: keys.orgPartition(orgId), SK: `REPO#${repoId}` });
const prebuildKey = (orgId: string, prebuildId: string) => ({ PK: keys.orgPartition(orgId), SK: `PREBUILD#${prebuildId}` });
const buildKey = (orgId: string, targetId: string, buildId: string) => ({ PK: keys.orgPartition(orgId), SK: `BUILD#${targetId}#${buildId}` });
const buildLocatorKey = (buildId: string) => ({ PK: `BUILDREF#${buildId}`, SK: "BUILDREF" });
/** A locator outlives any build that can still be running (BUILD_MAX_RUNNING_SECONDS), then DynamoDB removes it. */
const BUILD_LOCATOR_RETENTION_SECONDS = 24 * 3600;
const targetKey = (orgId: string, target: BuildTarget) => (target.kind === "repo" ? repoKey(orgId, target.id) : prebuildKey(orgId, target.id));

function summaryOf(build: BuildRecord): BuildSummary {
  return { id: build.id, status: build.status, trigger: build.trigger, startedAt: build.startedAt, endedAt: build.endedAt, error: build.error };
}

/** `SET a = :a, b = :b` from a record of changes (names aliased: `name`, `url` are fine, but stay uniform). */
function setExpression(changes: Record<string, unknown>, now: Date) {
  const entries = Object.entries(changes).filter(([, v]) => v !== undefined);
  const names: Record<string, string> = { "#updatedAt": "updatedAt" };
  const values: Record<string, unknown> = { ":updatedAt": now.toISOString() };
  const parts = ["#updatedAt = :updatedAt"];
  entries.forEach(([k, v], i) => {
    names[`#f${i}`] = k;
    values[`:f${i}`] = v;
    parts.push(`#f${i} = :f${i}`);
  });
  return { UpdateExpression: `SET ${parts.join(", ")}`, ExpressionAttributeNames: names, ExpressionAttributeValues: values };
}

export class DynamoRepoCatalog implements RepoCatalog {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async createRepo(record: RepoRecord): Promise<void> {
    // Ids are minted fresh: an existing item under the key would be a collision, never overwritten.
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...repoKey(record.orgId, record.id), ...record }, ConditionExpression: "attribute_not_exists(PK)" }));
  }

  async getRepo(orgId: string, repoId: string): Promise<RepoRecord | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: repoKey(orgId, repoId), ConsistentRead: true }));
    return out.Item ? RepoRecord.parse(stripKeys(out.Item)) : null;
  }

  async listRepos(orgId: string): Promise<RepoRecord[]> {
    return (await this.queryPrefix(orgId, "REPO#")).map((i) => RepoRecord.parse(i));
  }

  async updateRepo(orgId: string, repoId: string, changes: RepoChanges, now: Date): Promise<RepoRecord | null> {
    return this.update(repoKey(orgId, repoId), changes, now, (i) => RepoRecord.parse(i));
  }

  async updateRepoServiceCommands(orgId: string, repoId: string, commands: ServiceCommand[], now: Date): Promise<RepoRecord | null> {
    return this.updateRepo(orgId, repoId, { serviceCommands: commands }, now);
  }

  async deleteRepo(orgId: string, repoId: string): Promise<RepoRecord | null> {
    const out = await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: repoKey(orgId, repoId), ReturnValues: "ALL_OLD" }));
    return out.Attributes ? RepoRecord.parse(stripKeys(out.Attributes)) : null;
  }

  async createPrebuild(record: PrebuildRecord): Promise<void> {
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: { ...prebuildKey(record.orgId, record.id), GSI2PK: PREBUILDS_INDEX_PARTITION, GSI2SK: record.id, ...record },
        ConditionExpression: "attribute_not_exists(PK)",
      }),
    );
  }

  async getPrebuild(orgId: string, prebuildId: string): Promise<PrebuildRecord | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: prebuildKey(orgId, prebuildId), ConsistentRead: true }));
    return out.Item ? PrebuildRecord.parse(stripKeys(out.Item)) : null;
  }

  async listPrebuilds(orgId: string): Promise<PrebuildRecord[]> {
    return (await this.queryPrefix(orgId, "PREBUILD#")).map((i) => PrebuildRecord.parse(i));
  }

  async listAllPrebuilds(): Promise<PrebuildRecord[]> {
    const out: PrebuildRecord[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          IndexName: GSI_BY_STATUS,
          KeyConditionExpression: "GSI2PK = :pk",
          ExpressionAttributeValues: { ":pk": PREBUILDS_INDEX_PARTITION },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of page.Items ?? []) out.push(PrebuildRecord.parse(stripKeys(item)));
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }

  async updatePrebuild(orgId: string, prebuildId: string, changes: PrebuildChanges, now: Date): Promise<PrebuildRecord | null> {
    return this.update(prebuildKey(orgId, prebuildId), changes, now, (i) => PrebuildRecord.parse(i));
  }

  async deletePrebuild(orgId: string, prebuildId: string): Promise<PrebuildRecord | null> {
    const out = await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: prebuildKey(orgId, prebuildId), ReturnValues: "ALL_OLD" }));
    return out.Attributes ? PrebuildRecord.parse(stripKeys(out.Attributes)) : null;
  }

  async startBuild(build: BuildRecord): Promise<boolean> {
    try {
      // The target first: a build for a target deleted meanwhile is never stored.
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: targetKey(build.orgId, build.target),
          UpdateExpression: "SET latestBuild = :build",
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: { ":build": summaryOf(build) },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...buildKey(build.orgId, build.target.id, build.id), ...build } }));
    const ttl = Math.ceil(Date.parse(build.startedAt) / 1000) + BUILD_LOCATOR_RETENTION_SECONDS;
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...buildLocatorKey(build.id), orgId: build.orgId, target: build.target, [TTL_ATTRIBUTE]: ttl } }));
    return true;
  }

  async findBuild(buildId: string): Promise<BuildRecord | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: buildLocatorKey(buildId), ConsistentRead: true }));
    const orgId = out.Item?.orgId;
    const target = BuildTarget.safeParse(out.Item?.target);
    if (typeof orgId !== "string" || !target.success) return null;
    return this.getBuild(orgId, target.data, buildId);
  }

  async getBuild(orgId: string, target: BuildTarget, buildId: string): Promise<BuildRecord | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: buildKey(orgId, target.id, buildId), ConsistentRead: true }));
    return out.Item ? BuildRecord.parse(stripKeys(out.Item)) : null;
  }

  async listBuilds(orgId: string, target: BuildTarget, limit: number): Promise<BuildRecord[]> {
    const out = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
        ExpressionAttributeValues: { ":pk": keys.orgPartition(orgId), ":prefix": `BUILD#${target.id}#` },
        ScanIndexForward: false,
        Limit: limit,
      }),
    );
    return (out.Items ?? []).map((i) => BuildRecord.parse(stripKeys(i)));
  }

  async setBuildSandbox(orgId: string, target: BuildTarget, buildId: string, sandboxId: string): Promise<void> {
    await this.setBuildFields(orgId, target, buildId, { sandboxId });
  }

  async setBuildLog(orgId: string, target: BuildTarget, buildId: string, log: string[]): Promise<void> {
    await this.setBuildFields(orgId, target, buildId, { log });
  }

  async finishBuild(orgId: string, target: BuildTarget, buildId: string, outcome: BuildOutcome): Promise<void> {
    const out = await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: buildKey(orgId, target.id, buildId),
        UpdateExpression: "SET #status = :status, endedAt = :endedAt, snapshotId = :snapshotId, #error = :error, timings = :timings",
        ConditionExpression: "attribute_exists(PK)",
        ExpressionAttributeNames: { "#status": "status", "#error": "error" },
        ExpressionAttributeValues: { ":status": outcome.status, ":endedAt": outcome.endedAt, ":snapshotId": outcome.snapshotId, ":error": outcome.error, ":timings": outcome.timings },
        ReturnValues: "ALL_NEW",
      }),
    );
    const build = BuildRecord.parse(stripKeys(out.Attributes ?? {}));
    try {
      // Only the target's latest build speaks for it: a slower, older build ending later must
      // not overwrite the summary of a newer one.
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: targetKey(orgId, target),
          UpdateExpression: "SET latestBuild = :build",
          ConditionExpression: "attribute_exists(PK) AND latestBuild.id = :id",
          ExpressionAttributeValues: { ":build": summaryOf(build), ":id": buildId },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
  }

  async recordSnapshot(orgId: string, target: BuildTarget, snapshot: BuiltSnapshot): Promise<RecordSnapshotResult> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: targetKey(orgId, target),
          UpdateExpression: "SET #snapshot = :snapshot",
          // Two builds racing: only the one that started later may replace the snapshot (its
          // clone has the later commits); the target must still exist.
          ConditionExpression: "attribute_exists(PK) AND (attribute_not_exists(#snapshot) OR #snapshot = :null OR #snapshot.startedAt < :startedAt)",
          ExpressionAttributeNames: { "#snapshot": "snapshot" },
          ExpressionAttributeValues: { ":snapshot": snapshot, ":null": null, ":startedAt": snapshot.startedAt },
          ReturnValues: "ALL_OLD",
        }),
      );
      const previous = BuiltSnapshot.nullable().safeParse(out.Attributes?.snapshot ?? null);
      return { recorded: true, previous: previous.success ? previous.data : null };
    } catch (err) {
      if (isConditionFailure(err)) return { recorded: false, previous: null };
      throw err;
    }
  }

  private async setBuildFields(orgId: string, target: BuildTarget, buildId: string, fields: Record<string, unknown>): Promise<void> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const parts = Object.entries(fields).map(([k, v], i) => {
      names[`#f${i}`] = k;
      values[`:f${i}`] = v;
      return `#f${i} = :f${i}`;
    });
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: buildKey(orgId, target.id, buildId),
        UpdateExpression: `SET ${parts.join(", ")}`,
        ConditionExpression: "attribute_exists(PK)",
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
  }

  private async update<T>(key: { PK: string; SK: string }, changes: Record<string, unknown>, now: Date, parse: (item: Record<string, unknown>) => T): Promise<T | null> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({ TableName: this.tableName, Key: key, ...setExpression(changes, now), ConditionExpression: "attribute_exists(PK)", ReturnValues: "ALL_NEW" }),
      );
      return parse(stripKeys(out.Attributes ?? {}));
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  private async queryPrefix(orgId: string, prefix: string): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
          ExpressionAttributeValues: { ":pk": keys.orgPartition(orgId), ":prefix": prefix },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of page.Items ?? []) items.push(stripKeys(item));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }
}
