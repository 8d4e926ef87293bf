/**
 * Usage metering and org limits over DynamoDB (API.md "Usage, limits and credits"; key layout in
 * ./table-layout.ts).
 *
 * Exactly once without transactions (dynalite has none): usage is recorded per running interval,
 * not as increments. A session's running interval is identified by its start (`runningSince`,
 * set by the transition into `running`; an expiry migration keeps it, so a migration is one
 * continuous interval). Each UTC day the interval touches has one item,
 * `ORG#<org>` / `USAGE#<day>#<session>#<intervalStart>`, holding `from` (the interval's start
 * or midnight) and `meteredUntil`. Metering the interval up to `t` is one conditional write per
 * day: `SET meteredUntil = t, activeMs = t - from` if `meteredUntil < t` (or the item is new). The
 * item is a max-register: a retried flow step, a duplicated schedule delivery, two metering
 * passes at once or a late write from a crashed pass all write the same value or lose the
 * condition; none can count a millisecond twice, and the order they land in does not matter.
 * There is no second write to lose between a marker and a counter (nothing to recover).
 *
 * A day's usage is the sum over its items (one Query on `USAGE#<day>`), its session count the
 * distinct sessions among them. The metering pass writes each running session once per
 * METERING_INTERVAL_SECONDS (one request, two across a midnight); the transition that ends an
 * interval writes its end (functions/store/dynamo-session-store.ts `transition`).
 *
 * Limits: `ORG#<org>` / `LIMITS` holds `maxRunningSessions`, `monthlyActiveSeconds` and
 * `holders`, a map of the sessions holding one of the org's running places to when they took it.
 * Taking a place is one conditional `SET holders.<session> = now` (`size(holders) < max` or
 * already a holder), so two racing resumes at `max - 1` take at most one place between them.
 * Places are given back lazily: when the map is full, holders whose session neither runs nor is
 * being started by a flow (no live lease) and whose place is older than HOLD_GRACE_MS are
 * removed under a version condition (a concurrent take bumps the version, so a prune never
 * removes a place taken after it read the map), and the take is tried once more.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { GetCommand, QueryCommand, UpdateCommand } from "./dynamodb-sdk";
import { OrgLimits, UNLIMITED, secondsOf, splitByUtcDay, monthStart, utcDay, type UsageDay } from "../domain/usage";
import type { MeterInput, OrgUsageStore } from "../ports/org-usage";
import { METRIC_NAMES, type MetricsSink } from "../ports/metrics-sink";
import { GSI_BY_ORG, keys } from "./table-layout";
import { isConditionFailure } from "./item-lease";
import { batchGetItems } from "./batch-requests";
import { orgModelOf } from "./dynamo-org-settings";
import type { AgentModel } from "../domain/agent-settings";

/** The limits an `ORG#<org>` / `LIMITS` item holds (absent or unreadable: unlimited). */
function limitsOf(item: Record<string, unknown> | undefined): OrgLimits {
  const parsed = OrgLimits.safeParse({ ...UNLIMITED, maxRunningSessions: item?.maxRunningSessions ?? null, monthlyActiveSeconds: item?.monthlyActiveSeconds ?? null });
  return parsed.success ? parsed.data : UNLIMITED;
}

/** A running place taken less than this long ago is kept even if its session has not started yet (its flow is about to). */
export const HOLD_GRACE_MS = 60_000;

export class DynamoOrgUsageStore implements OrgUsageStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    /** `ActiveSeconds` (dimension `orgId`): the seconds each write added. */
    private readonly metrics?: MetricsSink,
  ) {}

  async meterInterval(input: MeterInput): Promise<number> {
    const start = new Date(input.intervalStart);
    if (Number.isNaN(start.getTime())) return 0;
    const sinceDay = input.since ? utcDay(input.since) : null;
    let addedMs = 0;
    for (const segment of splitByUtcDay(start, input.until)) {
      if (sinceDay !== null && segment.day < sinceDay) continue;
      try {
        const out = await this.doc.send(
          new UpdateCommand({
            TableName: this.tableName,
            Key: keys.usage(input.orgId, segment.day, input.sessionId, input.intervalStart),
            UpdateExpression: `SET #day = :day, sessionId = :sessionId, intervalStart = :start, #from = :from, meteredUntil = :to, activeMs = :ms${input.final ? ", closedAt = :to" : ""}`,
            // A pass: the max-register, only ever forward, and never on a closed item. The close is
            // authoritative (a pass that read the session while it ran may have written past its
            // end, in the race between its read and the transition); its retries write the same.
            ConditionExpression: input.final
              ? "attribute_not_exists(closedAt) OR closedAt = :to"
              : "attribute_not_exists(closedAt) AND (attribute_not_exists(meteredUntil) OR meteredUntil < :to)",
            ExpressionAttributeNames: { "#day": "day", "#from": "from" },
            ExpressionAttributeValues: {
              ":day": segment.day,
              ":sessionId": input.sessionId,
              ":start": input.intervalStart,
              ":from": segment.from,
              ":to": segment.to,
              ":ms": segment.ms,
            },
            ReturnValues: "UPDATED_OLD",
          }),
        );
        const before = typeof out.Attributes?.activeMs === "number" ? out.Attributes.activeMs : 0;
        addedMs += segment.ms - before;
      } catch (err) {
        // Someone metered this day of the interval as far or further: nothing to add.
        if (!isConditionFailure(err)) throw err;
      }
    }
    const added = secondsOf(addedMs);
    if (added > 0) this.metrics?.put(METRIC_NAMES.activeSeconds, added, "Seconds", { orgId: input.orgId });
    if (added > 0 && input.provider) this.metrics?.put(METRIC_NAMES.sandboxSeconds, added, "Seconds", { Provider: input.provider });
    return added;
  }

  async usageByDay(orgId: string, from: string, to: string): Promise<UsageDay[]> {
    const days = new Map<string, { ms: number; sessions: Set<string> }>();
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND SK BETWEEN :from AND :to",
          ExpressionAttributeNames: { "#day": "day" },
          ExpressionAttributeValues: { ":pk": keys.orgPartition(orgId), ":from": `${keys.usagePrefix}${from}`, ":to": `${keys.usagePrefix}${to}~` },
          ProjectionExpression: "#day, sessionId, activeMs",
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        if (typeof item.day !== "string" || typeof item.activeMs !== "number") continue;
        const day = days.get(item.day) ?? { ms: 0, sessions: new Set<string>() };
        day.ms += item.activeMs;
        if (typeof item.sessionId === "string") day.sessions.add(item.sessionId);
        days.set(item.day, day);
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return [...days.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([day, d]) => ({ day, activeSeconds: secondsOf(d.ms), sessions: d.sessions.size }));
  }

  async spentInMonth(orgId: string, at: Date): Promise<number> {
    const days = await this.usageByDay(orgId, monthStart(at), utcDay(at));
    return secondsOf(days.reduce((sum, d) => sum + Math.round(d.activeSeconds * 1000), 0));
  }

  async getLimits(orgId: string): Promise<OrgLimits> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.orgLimits(orgId), ProjectionExpression: "maxRunningSessions, monthlyActiveSeconds", ConsistentRead: true }),
    );
    return limitsOf(out.Item);
  }

  async getLimitsAndModel(orgId: string): Promise<{ limits: OrgLimits; model: AgentModel | null }> {
    const limitsKey = keys.orgLimits(orgId);
    const settingsKey = keys.orgSettings(orgId);
    const items = await batchGetItems(this.doc, this.tableName, [limitsKey, settingsKey], `org ${orgId} limits and settings`, {
      ProjectionExpression: "PK, SK, maxRunningSessions, monthlyActiveSeconds, #model",
      ExpressionAttributeNames: { "#model": "model" },
    });
    const bySk = (sk: string) => items.find((item) => item.SK === sk);
    return { limits: limitsOf(bySk(limitsKey.SK)), model: orgModelOf(bySk(settingsKey.SK)) };
  }

  async putLimits(orgId: string, changes: Partial<OrgLimits>, now: Date): Promise<OrgLimits> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = { ":now": now.toISOString(), ":one": 1, ":zero": 0 };
    const sets = ["updatedAt = :now", "holdersVersion = if_not_exists(holdersVersion, :zero) + :one"];
    for (const field of ["maxRunningSessions", "monthlyActiveSeconds"] as const) {
      if (changes[field] === undefined) continue;
      names[`#${field}`] = field;
      values[`:${field}`] = changes[field];
      sets.push(`#${field} = :${field}`);
    }
    if (changes.maxRunningSessions !== undefined && changes.maxRunningSessions !== null) {
      // Sessions that started while the org had no limit hold no place yet: the places start as
      // the sessions running now (a holder whose session stops running is pruned by a later take).
      names["#holders"] = "holders";
      values[":holders"] = Object.fromEntries((await this.runningSessionIds(orgId)).map((id) => [id, 0]));
      sets.push("#holders = :holders");
    }
    const out = await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: keys.orgLimits(orgId),
        UpdateExpression: `SET ${sets.join(", ")}`,
        ...(Object.keys(names).length > 0 ? { ExpressionAttributeNames: names } : {}),
        ExpressionAttributeValues: values,
        ReturnValues: "ALL_NEW",
      }),
    );
    return OrgLimits.parse({ ...UNLIMITED, maxRunningSessions: out.Attributes?.maxRunningSessions ?? null, monthlyActiveSeconds: out.Attributes?.monthlyActiveSeconds ?? null });
  }

  async acquireRunningSlot(orgId: string, sessionId: string, max: number, now: Date): Promise<boolean> {
    if (await this.take(orgId, sessionId, max, now)) return true;
    // Full: give back the places of sessions that no longer run, then try once more.
    const pruned = await this.prune(orgId, now);
    return pruned ? this.take(orgId, sessionId, max, now) : false;
  }

  private async take(orgId: string, sessionId: string, max: number, now: Date): Promise<boolean> {
    if (max <= 0) return false;
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.orgLimits(orgId),
          UpdateExpression: "SET #holders.#session = :now, holdersVersion = if_not_exists(holdersVersion, :zero) + :one",
          ConditionExpression: "attribute_exists(#holders.#session) OR size(#holders) < :max",
          ExpressionAttributeNames: { "#holders": "holders", "#session": sessionId },
          ExpressionAttributeValues: { ":now": now.getTime(), ":max": max, ":zero": 0, ":one": 1 },
        }),
      );
      return true;
    } catch (err) {
      // Full (or no holders map: a limit set before this version wrote one; the prune writes it).
      if (isConditionFailure(err) || (err as { name?: string } | null)?.name === "ValidationException") return false;
      throw err;
    }
  }

  /**
   * Removes holders that neither run nor are being started (no live flow lease), once their place
   * is older than HOLD_GRACE_MS (a resume takes its place before its flow takes the lease); true
   * when the set changed or may have changed.
   */
  private async prune(orgId: string, now: Date): Promise<boolean> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.orgLimits(orgId), ProjectionExpression: "holders, holdersVersion", ConsistentRead: true }),
    );
    const map = out.Item?.holders;
    const holders = typeof map === "object" && map !== null && !(map instanceof Set) ? Object.entries(map as Record<string, unknown>) : [];
    const version = typeof out.Item?.holdersVersion === "number" ? out.Item.holdersVersion : 0;
    const stale: string[] = [];
    for (const [id, takenAt] of holders) {
      if (typeof takenAt === "number" && now.getTime() - takenAt < HOLD_GRACE_MS) continue;
      const session = await this.doc.send(
        new GetCommand({
          TableName: this.tableName,
          Key: keys.session(id),
          ProjectionExpression: "#status, leaseOwner, leaseExpiresAt",
          ExpressionAttributeNames: { "#status": "status" },
          ConsistentRead: true,
        }),
      );
      const item = session.Item;
      const leased = typeof item?.leaseOwner === "string" && typeof item.leaseExpiresAt === "number" && item.leaseExpiresAt > now.getTime();
      if (!item || (item.status !== "running" && !leased)) stale.push(id);
    }
    const missing = out.Item !== undefined && holders.length === 0 && !(typeof map === "object" && map !== null);
    if (stale.length === 0 && !missing) return false;
    const names: Record<string, string> = { "#holders": "holders" };
    stale.forEach((id, i) => (names[`#s${i}`] = id));
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.orgLimits(orgId),
          UpdateExpression: missing
            ? "SET #holders = :empty, holdersVersion = :next"
            : `REMOVE ${stale.map((_, i) => `#holders.#s${i}`).join(", ")} SET holdersVersion = :next`,
          ConditionExpression: "holdersVersion = :version OR attribute_not_exists(holdersVersion)",
          ExpressionAttributeNames: missing ? { "#holders": "holders" } : names,
          ExpressionAttributeValues: { ":version": version, ":next": version + 1, ...(missing ? { ":empty": {} } : {}) },
        }),
      );
      return true;
    } catch (err) {
      // A take or another prune changed the set since it was read: the caller's retry sees it.
      if (isConditionFailure(err)) return true;
      throw err;
    }
  }

  async countRunning(orgId: string): Promise<number> {
    return (await this.runningSessionIds(orgId)).length;
  }

  private async runningSessionIds(orgId: string): Promise<string[]> {
    const ids: string[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          IndexName: GSI_BY_ORG,
          KeyConditionExpression: "GSI1PK = :pk",
          FilterExpression: "#status = :running",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":pk": keys.orgPartition(orgId), ":running": "running" },
          ProjectionExpression: "id",
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) if (typeof item.id === "string") ids.push(item.id);
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return ids;
  }
}
