/**
 * Slack's items (API.md "Slack"; functions/ports/slack.ts) in the single table:
 *
 * | item                    | PK                                  | SK               |
 * |-------------------------|-------------------------------------|------------------|
 * | delivery (ack dedupe)   | `SLACKDELIVERY#<key>`               | `SLACKDELIVERY`  | (`ttl`: 1 day)
 * | workspace binding       | `SLACKTEAM#<teamId>`                | `SLACKTEAM`      |
 * | org's workspace         | `ORG#<orgId>`                       | `SLACKWORKSPACE` |
 * | channel default repo    | `SLACKTEAM#<teamId>`                | `CHANNEL#<channelId>` |
 * | start claim             | `SLACKSTART#<deliveryKey>`          | `SLACKSTART`     | (`ttl`: 7 days)
 * | thread by session       | `SESSION#<sessionId>`               | `SLACKTHREAD`    |
 * | session by thread       | `SLACKTHREAD#<team>#<channel>#<ts>` | `SLACKTHREAD`    |
 * | outbox post             | `SLACKPOST#<key>`                   | `SLACKPOST`      | (`ttl`: 30 days)
 *
 * Every claim is a conditional put (`attribute_not_exists(PK)`): DynamoDB decides which of two
 * concurrent deliveries is first.
 */
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from "./dynamodb-sdk";
import { isConditionFailure } from "./item-lease";
import type { SlackPost, SlackStore, SlackThread, SlackWorkspace } from "../ports/slack";

const DAY_SECONDS = 86_400;
const ttl = (now: Date, days: number) => Math.floor(now.getTime() / 1000) + days * DAY_SECONDS;

const k = {
  delivery: (key: string) => ({ PK: `SLACKDELIVERY#${key}`, SK: "SLACKDELIVERY" }),
  team: (teamId: string) => ({ PK: `SLACKTEAM#${teamId}`, SK: "SLACKTEAM" }),
  orgWorkspace: (orgId: string) => ({ PK: `ORG#${orgId}`, SK: "SLACKWORKSPACE" }),
  channel: (teamId: string, channelId: string) => ({ PK: `SLACKTEAM#${teamId}`, SK: `CHANNEL#${channelId}` }),
  start: (key: string) => ({ PK: `SLACKSTART#${key}`, SK: "SLACKSTART" }),
  threadBySession: (sessionId: string) => ({ PK: `SESSION#${sessionId}`, SK: "SLACKTHREAD" }),
  sessionByThread: (teamId: string, channelId: string, ts: string) => ({ PK: `SLACKTHREAD#${teamId}#${channelId}#${ts}`, SK: "SLACKTHREAD" }),
  post: (key: string) => ({ PK: `SLACKPOST#${key}`, SK: "SLACKPOST" }),
};

const IS_NEW = "attribute_not_exists(PK)";

export class DynamoSlackStore implements SlackStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  private async putNew(item: Record<string, unknown>): Promise<boolean> {
    try {
      await this.doc.send(new PutCommand({ TableName: this.tableName, Item: item, ConditionExpression: IS_NEW }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  private async get(key: { PK: string; SK: string }, consistent = false): Promise<Record<string, unknown> | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: key, ConsistentRead: consistent }));
    return out.Item ?? null;
  }

  private async delete(key: { PK: string; SK: string }): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: key }));
  }

  recordDelivery(key: string, now: Date): Promise<boolean> {
    return this.putNew({ ...k.delivery(key), receivedAt: now.toISOString(), ttl: ttl(now, 1) });
  }

  forgetDelivery(key: string): Promise<void> {
    return this.delete(k.delivery(key));
  }

  async getWorkspace(teamId: string): Promise<SlackWorkspace | null> {
    const item = await this.get(k.team(teamId), true);
    return item ? workspaceOf(item) : null;
  }

  async bindWorkspace(input: { teamId: string; orgId: string; defaultRepo: string | null; now: Date }): Promise<SlackWorkspace | "conflict"> {
    const at = input.now.toISOString();
    const previous = await this.workspaceOfOrg(input.orgId);
    const existing = await this.get(k.team(input.teamId), true);
    const workspace: SlackWorkspace = {
      teamId: input.teamId,
      orgId: input.orgId,
      defaultRepo: input.defaultRepo,
      createdAt: typeof existing?.createdAt === "string" && existing.orgId === input.orgId ? existing.createdAt : at,
      updatedAt: at,
    };
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { ...k.team(input.teamId), ...workspace },
          // Another org's team is never taken over.
          ConditionExpression: `${IS_NEW} OR orgId = :org`,
          ExpressionAttributeValues: { ":org": input.orgId },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) return "conflict";
      throw err;
    }
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...k.orgWorkspace(input.orgId), teamId: input.teamId, updatedAt: at } }));
    // The org moved to another team: the old binding goes (one team per org through the API).
    if (previous && previous.teamId !== input.teamId) await this.unbindTeamItem(previous.teamId, input.orgId);
    return workspace;
  }

  async workspaceOfOrg(orgId: string): Promise<SlackWorkspace | null> {
    const link = await this.get(k.orgWorkspace(orgId), true);
    if (typeof link?.teamId !== "string") return null;
    const workspace = await this.getWorkspace(link.teamId);
    return workspace?.orgId === orgId ? workspace : null;
  }

  async unbindWorkspace(teamId: string, orgId: string): Promise<boolean> {
    const removed = await this.unbindTeamItem(teamId, orgId);
    await this.delete(k.orgWorkspace(orgId));
    return removed;
  }

  private async unbindTeamItem(teamId: string, orgId: string): Promise<boolean> {
    try {
      await this.doc.send(
        new DeleteCommand({ TableName: this.tableName, Key: k.team(teamId), ConditionExpression: "orgId = :org", ExpressionAttributeValues: { ":org": orgId } }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async channelDefaultRepo(teamId: string, channelId: string): Promise<string | null> {
    const item = await this.get(k.channel(teamId, channelId));
    return typeof item?.repo === "string" ? item.repo : null;
  }

  async setChannelDefaultRepo(teamId: string, channelId: string, repo: string, now: Date): Promise<void> {
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...k.channel(teamId, channelId), repo, updatedAt: now.toISOString() } }));
  }

  async claimStart(deliveryKey: string, sessionId: string, now: Date): Promise<{ sessionId: string; fresh: boolean }> {
    if (await this.putNew({ ...k.start(deliveryKey), sessionId, createdAt: now.toISOString(), ttl: ttl(now, 7) })) return { sessionId, fresh: true };
    const item = await this.get(k.start(deliveryKey), true);
    if (typeof item?.sessionId !== "string") throw new Error(`slack start claim ${deliveryKey} has no session id`);
    return { sessionId: item.sessionId, fresh: false };
  }

  async putThread(thread: SlackThread, now: Date): Promise<void> {
    const at = now.toISOString();
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...k.sessionByThread(thread.teamId, thread.channelId, thread.threadTs), ...thread, createdAt: at } }));
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...k.threadBySession(thread.sessionId), ...thread, createdAt: at } }));
  }

  async threadBySession(sessionId: string): Promise<SlackThread | null> {
    const item = await this.get(k.threadBySession(sessionId));
    return item ? threadOf(item) : null;
  }

  async threadByTs(teamId: string, channelId: string, threadTs: string): Promise<SlackThread | null> {
    const item = await this.get(k.sessionByThread(teamId, channelId, threadTs), true);
    return item ? threadOf(item) : null;
  }

  async getPost(key: string): Promise<SlackPost | null> {
    const item = await this.get(k.post(key), true);
    return item ? postOf(key, item) : null;
  }

  async beginPost(key: string, channelId: string, now: Date): Promise<{ post: SlackPost; fresh: boolean }> {
    const item = { ...k.post(key), channelId, ts: null, sendingSince: now.toISOString(), ttl: ttl(now, 30) };
    if (await this.putNew(item)) return { post: postOf(key, item), fresh: true };
    const existing = await this.getPost(key);
    if (!existing) throw new Error(`slack post ${key} vanished`);
    return { post: existing, fresh: false };
  }

  async recordPostTs(key: string, ts: string): Promise<void> {
    await this.doc.send(new UpdateCommand({ TableName: this.tableName, Key: k.post(key), UpdateExpression: "SET ts = :ts", ExpressionAttributeValues: { ":ts": ts } }));
  }
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function workspaceOf(item: Record<string, unknown>): SlackWorkspace {
  return { teamId: str(item.teamId), orgId: str(item.orgId), defaultRepo: typeof item.defaultRepo === "string" ? item.defaultRepo : null, createdAt: str(item.createdAt), updatedAt: str(item.updatedAt) };
}

function threadOf(item: Record<string, unknown>): SlackThread {
  return { sessionId: str(item.sessionId), teamId: str(item.teamId), channelId: str(item.channelId), threadTs: str(item.threadTs), userId: str(item.userId) };
}

function postOf(key: string, item: Record<string, unknown>): SlackPost {
  return { key, channelId: str(item.channelId), ts: typeof item.ts === "string" ? item.ts : null, sendingSince: str(item.sendingSince) };
}
