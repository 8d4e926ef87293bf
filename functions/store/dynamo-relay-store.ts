/**
 * Relay ownership (ports/relay.ts) in the table (key layout: ./table-layout.ts):
 *
 * - one heartbeat item per relay process, `RELAYS` / `RELAY#<owner>`: `owner`, `epoch` (grows
 *   with every registration), `expiresAt` (epoch ms), `ttl`. All heartbeats share one
 *   partition, so one Query lists the live relays;
 * - on the session item, written once at claim: `relayOwner`, `relayEpoch`, `relaySandbox`,
 *   `relayFence` (grows with every claim and seize); a flow's seize sets `relayOwner` to
 *   `flow:<execution>` with `relayExpiresAt` instead. Separate from the flow lease (`leaseOwner`,
 *   `fence`), and never touched by lifecycle writes, which SET named fields only.
 *
 * Takeover reads the named relay's heartbeat and writes the claim on condition that the session
 * still names what was read (owner and fence). That is enough because a heartbeat epoch that
 * expired can never be renewed (`beat` requires it unexpired): once seen dead, (owner, epoch)
 * stays dead, so an epoch confirmed dead is remembered and never read again.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { GetCommand, QueryCommand, UpdateCommand } from "./dynamodb-sdk";
import * as z from "zod";
import { LeaseLostError, NotFoundError, ValidationError } from "../domain/errors";
import type { ClaimablePage, ClaimedSession, ClaimView, RelayClaim, RelayHeartbeat, RelayLease, RelayLeaseStore } from "../ports/relay";
import { ItemLease, conditions, isConditionFailure } from "./item-lease";
import { GSI_BY_RELAY, GSI_BY_STATUS, TTL_ATTRIBUTE, keys } from "./table-layout";

const ClaimableCursor = z.object({ PK: z.string(), SK: z.string(), GSI2PK: z.string(), GSI2SK: z.string() });
const HeldByCursor = z.object({ PK: z.string(), SK: z.string(), relayOwner: z.string() });

export const RELAYS_PARTITION = "RELAYS";
export const relayHeartbeatKey = (owner: string) => ({ PK: RELAYS_PARTITION, SK: `RELAY#${owner}` });
/** A heartbeat item outlives its expiry by a day (DynamoDB deletes it later; readers check `expiresAt`). */
const HEARTBEAT_RETENTION_SECONDS = 86_400;
const FLOW_OWNER_PREFIX = "flow:";
/**
 * A peer's heartbeat counts as expired only this long after its `expiresAt` by the reader's
 * clock: a reader whose clock runs up to this much ahead of the owner's still never takes over
 * while the owner (which stops acting at `expiresAt` by its own clock, and can renew only before
 * it) may still stream. The owner's own checks (`beat`, the relay's guard) have no margin. A
 * retired heartbeat (`expiresAt` 0) is dead at once.
 */
export const RELAY_CLOCK_SKEW_MARGIN_MS = 1_000;

const VIEW_NAMES = {
  "#status": "status",
  "#sandboxId": "sandboxId",
  "#openCodeUrl": "openCodeUrl",
  "#agentSession": "codingAgentSessionId",
  "#owner": "relayOwner",
  "#epoch": "relayEpoch",
  "#sandbox": "relaySandbox",
  "#fence": "relayFence",
  "#expiresAt": "relayExpiresAt",
};

/** A listing's projection: the session id and its claim view (GSI3 projects exactly these, table-layout.ts). */
const LISTED_VIEW = ["id", ...Object.keys(VIEW_NAMES)].join(", ");

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const num = (v: unknown): number | null => (typeof v === "number" ? v : null);

function viewOf(sessionId: string, item: Record<string, unknown>): ClaimView {
  return {
    sessionId,
    status: str(item.status) ?? "",
    sandboxId: str(item.sandboxId),
    openCodeUrl: str(item.openCodeUrl),
    codingAgentSessionId: str(item.codingAgentSessionId),
    relayOwner: str(item.relayOwner),
    relayEpoch: num(item.relayEpoch),
    relaySandbox: str(item.relaySandbox),
    relayFence: num(item.relayFence) ?? 0,
    relayExpiresAt: num(item.relayExpiresAt),
  };
}

/** A flow's seize of the session's relay (the same attributes a relay's claim names its owner and fence in). */
export const RELAY_SEIZE_ATTRIBUTES = { owner: "relayOwner", expiresAt: "relayExpiresAt", fence: "relayFence" } as const;

export class DynamoRelayLeaseStore implements RelayLeaseStore {
  /** The seize (a flow's hold) uses the one lease mechanism; relays' claims are written below. */
  private readonly seizeLease: ItemLease;
  /** `owner#epoch` confirmed dead: an expired epoch never lives again. */
  private readonly dead = new Set<string>();

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {
    this.seizeLease = new ItemLease(doc, tableName, RELAY_SEIZE_ATTRIBUTES);
  }

  async register(owner: string, now: Date, ttlSeconds: number): Promise<RelayHeartbeat> {
    const expiresAt = now.getTime() + Math.round(ttlSeconds * 1000);
    const out = await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: relayHeartbeatKey(owner),
        UpdateExpression: "SET #owner = :owner, #expiresAt = :expiresAt, #ttl = :ttl, #epoch = if_not_exists(#epoch, :zero) + :one",
        ExpressionAttributeNames: { "#owner": "owner", "#expiresAt": "expiresAt", "#ttl": TTL_ATTRIBUTE, "#epoch": "epoch" },
        ExpressionAttributeValues: { ":owner": owner, ":expiresAt": expiresAt, ":ttl": Math.ceil(expiresAt / 1000) + HEARTBEAT_RETENTION_SECONDS, ":zero": 0, ":one": 1 },
        ReturnValues: "UPDATED_NEW",
      }),
    );
    return { owner, epoch: Number(out.Attributes?.epoch), expiresAt };
  }

  async beat(heartbeat: RelayHeartbeat, now: Date, ttlSeconds: number): Promise<RelayHeartbeat> {
    const expiresAt = now.getTime() + Math.round(ttlSeconds * 1000);
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: relayHeartbeatKey(heartbeat.owner),
          UpdateExpression: "SET #expiresAt = :expiresAt, #ttl = :ttl",
          // An expired (or retired) epoch stays dead: its sessions may be another relay's by now.
          ConditionExpression: conditions({ sameEpoch: "#epoch = :epoch", alive: "#expiresAt > :now" }),
          ExpressionAttributeNames: { "#expiresAt": "expiresAt", "#ttl": TTL_ATTRIBUTE, "#epoch": "epoch" },
          ExpressionAttributeValues: { ":expiresAt": expiresAt, ":ttl": Math.ceil(expiresAt / 1000) + HEARTBEAT_RETENTION_SECONDS, ":epoch": heartbeat.epoch, ":now": now.getTime() },
        }),
      );
      return { ...heartbeat, expiresAt };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      throw new LeaseLostError(`relay ${heartbeat.owner}: heartbeat epoch ${heartbeat.epoch} expired or was retired`, {
        context: { owner: heartbeat.owner, epoch: heartbeat.epoch },
      });
    }
  }

  async retire(heartbeat: RelayHeartbeat): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: relayHeartbeatKey(heartbeat.owner),
          UpdateExpression: "SET #expiresAt = :zero",
          ConditionExpression: conditions({ sameEpoch: "#epoch = :epoch" }),
          ExpressionAttributeNames: { "#expiresAt": "expiresAt", "#epoch": "epoch" },
          ExpressionAttributeValues: { ":zero": 0, ":epoch": heartbeat.epoch },
        }),
      );
    } catch (err) {
      // A newer epoch of the same owner registered meanwhile: this one is dead already.
      if (!isConditionFailure(err)) throw err;
    }
  }

  async liveRelays(now: Date): Promise<Map<string, number>> {
    const live = new Map<string, number>();
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk",
          FilterExpression: "#expiresAt > :now",
          ProjectionExpression: "#owner, #epoch",
          ExpressionAttributeNames: { "#owner": "owner", "#epoch": "epoch", "#expiresAt": "expiresAt" },
          ExpressionAttributeValues: { ":pk": RELAYS_PARTITION, ":now": now.getTime() - RELAY_CLOCK_SKEW_MARGIN_MS },
          ConsistentRead: true,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const owner = str(item.owner);
        const epoch = num(item.epoch);
        if (owner !== null && epoch !== null) live.set(owner, epoch);
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return live;
  }

  async view(sessionId: string): Promise<ClaimView | null> {
    const out = await this.doc.send(
      new GetCommand({
        TableName: this.tableName,
        Key: keys.session(sessionId),
        ConsistentRead: true,
        ProjectionExpression: Object.keys(VIEW_NAMES).join(", "),
        ExpressionAttributeNames: VIEW_NAMES,
      }),
    );
    return out.Item ? viewOf(sessionId, out.Item) : null;
  }

  /** Whether `owner` runs epoch `epoch` at `now` (a live map's positive answer is trusted; anything else is confirmed). */
  private async relayAlive(owner: string, epoch: number, now: Date, live?: Map<string, number>): Promise<boolean> {
    const key = `${owner}#${epoch}`;
    if (this.dead.has(key)) return false;
    if (live?.get(owner) === epoch) return true;
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: relayHeartbeatKey(owner), ConsistentRead: true, ProjectionExpression: "#epoch, #expiresAt", ExpressionAttributeNames: { "#epoch": "epoch", "#expiresAt": "expiresAt" } }),
    );
    const alive = num(out.Item?.epoch) === epoch && (num(out.Item?.expiresAt) ?? 0) > now.getTime() - RELAY_CLOCK_SKEW_MARGIN_MS;
    if (!alive && this.dead.size < 100_000) this.dead.add(key);
    return alive;
  }

  /** Who holds `v` at `now`: nobody (claimable), `heartbeat` itself, or someone alive. */
  private async holder(v: ClaimView, now: Date, self: RelayHeartbeat | null, live?: Map<string, number>): Promise<"free" | "self" | "held"> {
    if (v.relayOwner === null) return "free";
    if (v.relayOwner.startsWith(FLOW_OWNER_PREFIX) || v.relayEpoch === null) return (v.relayExpiresAt ?? 0) > now.getTime() ? "held" : "free";
    // A claim for another sandbox (resume, migration) watches nothing that runs now.
    if (v.relaySandbox !== v.sandboxId) return "free";
    if (self && v.relayOwner === self.owner) return v.relayEpoch === self.epoch ? "self" : "free";
    return (await this.relayAlive(v.relayOwner, v.relayEpoch, now, live)) ? "held" : "free";
  }

  async claim(seen: ClaimView, heartbeat: RelayHeartbeat, now: Date, live?: Map<string, number>): Promise<ClaimedSession | null> {
    const sandboxId = seen.sandboxId;
    if (seen.status !== "running" || !sandboxId) return null;
    const holder = await this.holder(seen, now, heartbeat, live);
    if (holder === "held") return null;
    if (holder === "self") return { sessionId: seen.sessionId, owner: heartbeat.owner, epoch: heartbeat.epoch, sandboxId, fence: seen.relayFence, session: seen };
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(seen.sessionId),
          UpdateExpression: "SET #owner = :owner, #epoch = :epoch, #sandbox = :sandbox, #fence = if_not_exists(#fence, :zero) + :one REMOVE #expiresAt",
          ConditionExpression: conditions({
            // Two relays must never both stream one session: the claim stands only if nobody
            // claimed or seized it since it was read (every claim and seize grows the fence).
            unchanged: seen.relayOwner === null ? "attribute_not_exists(#owner)" : "#owner = :seenOwner",
            sameFence: seen.relayFence === 0 ? "attribute_not_exists(#fence) OR #fence = :zero" : "#fence = :seenFence",
            // For the runtime that runs now, never one that was replaced meanwhile.
            running: "#status = :running AND #sandboxId = :sandbox",
          }),
          ExpressionAttributeNames: { "#owner": "relayOwner", "#epoch": "relayEpoch", "#sandbox": "relaySandbox", "#fence": "relayFence", "#expiresAt": "relayExpiresAt", "#status": "status", "#sandboxId": "sandboxId" },
          ExpressionAttributeValues: {
            ":owner": heartbeat.owner,
            ":epoch": heartbeat.epoch,
            ":sandbox": sandboxId,
            ":zero": 0,
            ":one": 1,
            ":running": "running",
            ...(seen.relayOwner === null ? {} : { ":seenOwner": seen.relayOwner }),
            ...(seen.relayFence === 0 ? {} : { ":seenFence": seen.relayFence }),
          },
          // The session as written (the claim's runtime is what the condition held): no read after it.
          ReturnValues: "ALL_NEW",
        }),
      );
      const session = viewOf(seen.sessionId, out.Attributes ?? {});
      return { sessionId: seen.sessionId, owner: heartbeat.owner, epoch: heartbeat.epoch, sandboxId, fence: session.relayFence, session };
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  async releaseClaim(claim: RelayClaim): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(claim.sessionId),
          UpdateExpression: "REMOVE #owner, #epoch, #sandbox",
          // A stale holder must not free the claim its successor holds.
          ConditionExpression: conditions({ stillOurs: "#owner = :owner AND #epoch = :epoch AND #fence = :fence" }),
          ExpressionAttributeNames: { "#owner": "relayOwner", "#epoch": "relayEpoch", "#sandbox": "relaySandbox", "#fence": "relayFence" },
          ExpressionAttributeValues: { ":owner": claim.owner, ":epoch": claim.epoch, ":fence": claim.fence },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
  }

  async seize(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease> {
    const lease = await this.seizeLease.seize(sessionId, owner, now, ttlSeconds);
    if (!lease) throw new NotFoundError(`session ${sessionId} not found`);
    return lease;
  }

  release(lease: RelayLease): Promise<void> {
    return this.seizeLease.release(lease);
  }

  async listClaimable(now: Date, options: { limit: number; cursor?: string | null; live?: Map<string, number> }): Promise<ClaimablePage> {
    const partition = keys.statusPartition("running");
    return this.listIndex(GSI_BY_STATUS, "GSI2PK", partition, ClaimableCursor, now, options);
  }

  async listHeldBy(owner: string, now: Date, options: { limit: number; cursor?: string | null; live?: Map<string, number> }): Promise<ClaimablePage> {
    return this.listIndex(GSI_BY_RELAY, "relayOwner", owner, HeldByCursor, now, options);
  }

  /**
   * One page of an index partition (`key` = `value`): the sessions in it still running that nobody
   * live holds at `now`, each with its claim view. A cursor is accepted only from the same
   * partition: one from another listing must not steer the query elsewhere.
   */
  private async listIndex(
    indexName: string,
    key: string,
    value: string,
    cursorSchema: z.ZodType<Record<string, string>>,
    now: Date,
    options: { limit: number; cursor?: string | null; live?: Map<string, number> },
  ): Promise<ClaimablePage> {
    let startKey: Record<string, string> | undefined;
    if (options.cursor) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.from(options.cursor, "base64url").toString("utf8"));
      } catch {
        throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
      }
      const cursor = cursorSchema.safeParse(parsed);
      if (!cursor.success || cursor.data[key] !== value) throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
      startKey = cursor.data;
    }
    const out = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: indexName,
        KeyConditionExpression: "#key = :key",
        ProjectionExpression: LISTED_VIEW,
        ExpressionAttributeNames: { ...VIEW_NAMES, "#key": key },
        ExpressionAttributeValues: { ":key": value },
        Limit: options.limit,
        ...(startKey ? { ExclusiveStartKey: startKey } : {}),
      }),
    );
    const live = options.live ?? (await this.liveRelays(now));
    const views: ClaimView[] = [];
    for (const item of out.Items ?? []) {
      const id = str(item.id);
      // The byRelay index also keeps sessions that stopped running while a relay still named them.
      if (id === null || item.status !== "running") continue;
      const v = viewOf(id, item);
      if ((await this.holder(v, now, null, live)) === "free") views.push(v);
    }
    const last = out.LastEvaluatedKey;
    return { sessions: views, nextCursor: last ? Buffer.from(JSON.stringify(last)).toString("base64url") : null };
  }

  async watched(sessionId: string, now: Date): Promise<boolean> {
    const v = await this.view(sessionId);
    if (!v) return false;
    return (await this.holder(v, now, null)) === "held";
  }
}
