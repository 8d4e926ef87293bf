/**
 * The session store over DynamoDB (dynalite locally). Key layout: ./table-layout.ts.
 * Every lifecycle write is a conditional write built from named clauses; a failed condition is
 * re-read and mapped to a domain error. Other SDK errors propagate unchanged.
 */
import type { DynamoDBDocumentClient, QueryCommandInput } from "@aws-sdk/lib-dynamodb";
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, ScanCommand, UpdateCommand } from "./dynamodb-sdk";
import { createHash } from "node:crypto";
import * as z from "zod";
import { ConflictError, InvalidTransitionError, LeaseBusyError, LeaseLostError, NotFoundError, StaleWriteError, ValidationError } from "../domain/errors";
import { ROLES, type Principal } from "../domain/principal";
import { SessionRecord, type SessionStatus } from "../domain/session";
import { allowedSources, applyTransition, pickTransitionChanges, type TransitionChanges } from "../domain/session-transitions";
import type { ApiTokenStore, Lease, LeaseGuard, ListOptions, ListPage, NewTokenPrincipal, SessionStore, TokenConnections } from "../ports/session-store";
import { GSI_BY_ORG, GSI_BY_STATUS, keys } from "./table-layout";
import { batchPutItems } from "./batch-requests";
import type { OrgUsageStore } from "../ports/org-usage";
import type { RelayLease } from "../ports/relay";
import { RELAY_SEIZE_ATTRIBUTES } from "./dynamo-relay-store";
import { ItemLease, conditionFailureItem, conditions, isConditionFailure, storedLeaseOf, stripKeys, type StoredLease } from "./item-lease";

const FLOW_LEASE = { owner: "leaseOwner", expiresAt: "leaseExpiresAt", fence: "fence" } as const;

function toRecord(item: Record<string, unknown>): SessionRecord {
  return SessionRecord.parse(stripKeys(item));
}

const CursorKey = z.record(z.string(), z.string());

function encodeCursor(key: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(key)).toString("base64url");
}

/**
 * A cursor back to the listing's exclusive start key. It must be exactly the key this listing
 * mints: every key attribute of the index, nothing else, each a non-empty string, the partition
 * the caller's own, and the table key a session's. Anything else (a forged cursor with some
 * key attributes missing, which DynamoDB would refuse with a ValidationException) is a 400.
 */
function decodeCursor(cursor: string, expected: { attribute: string; value: string }, keyAttributes: readonly string[]): Record<string, string> {
  const invalid = () => new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  const key = CursorKey.safeParse(parsed);
  if (!key.success) throw invalid();
  const names = Object.keys(key.data);
  const exactShape = names.length === keyAttributes.length && keyAttributes.every((k) => (key.data[k] ?? "") !== "");
  // A cursor from another org or another listing must not steer the query elsewhere.
  if (!exactShape || key.data[expected.attribute] !== expected.value || !(key.data.PK ?? "").startsWith("SESSION#") || key.data.SK !== "SESSION") {
    throw invalid();
  }
  return key.data;
}

/** How many Query pages one list call may read while filling a filtered page. */
const MAX_QUERY_PAGES = 10;

export class DynamoSessionStore implements SessionStore {
  private readonly lease: ItemLease;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    /** Meters the end of each running interval a transition closes (usage; absent: not metered). */
    private readonly usage?: Pick<OrgUsageStore, "meterInterval">,
  ) {
    this.lease = new ItemLease(doc, tableName, FLOW_LEASE);
  }

  async createSession(record: SessionRecord, options: { freshId?: boolean } = {}): Promise<void> {
    const marker = { ...keys.openSession(record.orgId, record.id), sessionId: record.id, createdAt: record.createdAt };
    const item = {
      ...keys.session(record.id),
      ...keys.sessionByOrg(record.orgId, record.createdAt, record.id),
      ...keys.sessionByStatus(record.status, record.updatedAt, record.id),
      ...record,
    };
    if (options.freshId) {
      // One request (issue 15). A batch that failed part-way may have written the session alone:
      // the marker is put once more by itself, so a session is never left uncounted (a marker
      // without its session is an overcount the reconciling count repairs).
      try {
        await batchPutItems(this.doc, this.tableName, [marker, item], `session ${record.id}`);
      } catch (err) {
        await this.doc.send(new PutCommand({ TableName: this.tableName, Item: marker }));
        throw err;
      }
      return;
    }
    // The open-session marker first: a failed create can only leave a marker without its session,
    // an overcount the reconciling count repairs, never a session nobody counts.
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: marker }));
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: item,
          // Two creates with one id must not overwrite each other.
          ConditionExpression: conditions({ isNew: "attribute_not_exists(PK)" }),
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) throw new ConflictError(`session ${record.id} already exists`, { cause: err });
      throw err;
    }
  }

  async countOpenSessions(orgId: string, options: { reconcile?: boolean } = {}): Promise<number> {
    const sessionIds: string[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
          ExpressionAttributeValues: { ":pk": keys.orgPartition(orgId), ":prefix": keys.openSessionPrefix },
          ProjectionExpression: "sessionId",
          ConsistentRead: true,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) if (typeof item.sessionId === "string") sessionIds.push(item.sessionId);
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    if (!options.reconcile) return sessionIds.length;
    const open = await Promise.all(
      sessionIds.map(async (sessionId) => {
        const out = await this.doc.send(
          new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ProjectionExpression: "#status", ExpressionAttributeNames: { "#status": "status" }, ConsistentRead: true }),
        );
        if (out.Item && out.Item.status !== "stopped") return true;
        await this.deleteOpenMarker(orgId, sessionId);
        return false;
      }),
    );
    return open.filter(Boolean).length;
  }

  /**
   * Idempotent (a max-register per interval and day: dynamo-org-usage.ts). Tried three times in
   * process; a failure after that is logged and leaves only this interval's last stretch (since
   * the previous metering pass) unrecorded: never a second counted twice.
   */
  private async meterClosedInterval(session: SessionRecord, intervalStart: string, endedAt: string): Promise<void> {
    const usage = this.usage;
    if (!usage) return;
    for (let attempt = 1; ; attempt++) {
      try {
        await usage.meterInterval({ orgId: session.orgId, sessionId: session.id, provider: session.provider, intervalStart, until: new Date(endedAt), final: true });
        return;
      } catch (err) {
        if (attempt >= 3) {
          console.error(JSON.stringify({ level: "ERROR", message: "metering a closed running interval failed", sessionId: session.id, intervalStart, endedAt, error: String(err) }));
          return;
        }
      }
    }
  }

  private async deleteOpenMarker(orgId: string, sessionId: string): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keys.openSession(orgId, sessionId) }));
  }

  async getSession(sessionId: string): Promise<SessionRecord | null> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true }),
    );
    return out.Item ? toRecord(out.Item) : null;
  }

  async getSessionWithLease(sessionId: string): Promise<{ session: SessionRecord; lease: StoredLease } | null> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true }),
    );
    return out.Item ? { session: toRecord(out.Item), lease: storedLeaseOf(out.Item, FLOW_LEASE) } : null;
  }

  listSessionsByOrg(orgId: string, options: ListOptions): Promise<ListPage<SessionRecord>> {
    const partition = keys.orgPartition(orgId);
    return this.listPage(
      {
        IndexName: GSI_BY_ORG,
        KeyConditionExpression: "GSI1PK = :pk",
        ExpressionAttributeValues: { ":pk": partition },
        ScanIndexForward: false,
      },
      { attribute: "GSI1PK", value: partition },
      ["PK", "SK", "GSI1PK", "GSI1SK"],
      options,
    );
  }

  listSessionsByStatus(status: SessionStatus, options: Omit<ListOptions, "status">): Promise<ListPage<SessionRecord>> {
    const partition = keys.statusPartition(status);
    return this.listPage(
      {
        IndexName: GSI_BY_STATUS,
        KeyConditionExpression: "GSI2PK = :pk",
        ExpressionAttributeValues: { ":pk": partition },
        ScanIndexForward: true,
      },
      { attribute: "GSI2PK", value: partition },
      ["PK", "SK", "GSI2PK", "GSI2SK"],
      options,
    );
  }

  /** Select COUNT on the by-status index, page after page (DynamoDB pages at 1 MB read; `pageLimit` pages sooner, for tests). */
  async countSessionsByStatus(status: SessionStatus, pageLimit?: number): Promise<number> {
    let count = 0;
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          IndexName: GSI_BY_STATUS,
          KeyConditionExpression: "GSI2PK = :pk",
          ExpressionAttributeValues: { ":pk": keys.statusPartition(status) },
          Select: "COUNT",
          ...(pageLimit ? { Limit: pageLimit } : {}),
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      count += out.Count ?? 0;
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return count;
  }

  private async listPage(
    base: Omit<QueryCommandInput, "TableName">,
    cursorScope: { attribute: string; value: string },
    keyAttributes: string[],
    options: ListOptions,
  ): Promise<ListPage<SessionRecord>> {
    let startKey: Record<string, unknown> | undefined = options.cursor ? decodeCursor(options.cursor, cursorScope, keyAttributes) : undefined;
    const items: Record<string, unknown>[] = [];
    const filter = options.status
      ? {
          FilterExpression: "#status = :status",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ...base.ExpressionAttributeValues, ":status": options.status },
        }
      : {};
    for (let page = 0; page < MAX_QUERY_PAGES; page++) {
      const out = await this.doc.send(
        new QueryCommand({
          ...base,
          ...filter,
          TableName: this.tableName,
          Limit: options.limit - items.length,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      items.push(...(out.Items ?? []));
      startKey = out.LastEvaluatedKey;
      if (!startKey || items.length >= options.limit) break;
    }
    const pageItems = items.slice(0, options.limit);
    const last = pageItems.at(-1);
    let nextCursor: string | null = null;
    if (items.length > options.limit && last) {
      nextCursor = encodeCursor(Object.fromEntries(keyAttributes.map((k) => [k, last[k]])));
    } else if (startKey) {
      nextCursor = encodeCursor(startKey);
    }
    return { items: pageItems.map(toRecord), nextCursor };
  }

  async transition(
    current: SessionRecord,
    to: SessionStatus,
    now: Date,
    wider: TransitionChanges = {},
    guard?: LeaseGuard,
  ): Promise<SessionRecord> {
    const next = await this.writeTransition(current, to, now, wider, guard);
    // The version condition held, so `current` is what was stored: its `runningSince` is the
    // interval this write ended, at `now` (the same instant `activeSeconds` counted to).
    if (current.status === "running" && current.runningSince && this.usage) await this.meterClosedInterval(current, current.runningSince, next.updatedAt);
    if (next.status === "stopped") {
      // Best effort, after the committed stop: a lost delete only overcounts until
      // `countOpenSessions({reconcile: true})` finds the session stopped.
      await this.deleteOpenMarker(next.orgId, next.id).catch(() => undefined);
    }
    return next;
  }

  private async writeTransition(
    current: SessionRecord,
    to: SessionStatus,
    now: Date,
    wider: TransitionChanges,
    guard: LeaseGuard | undefined,
  ): Promise<SessionRecord> {
    const changes = pickTransitionChanges(wider);
    const next = applyTransition(current, to, now, changes);
    const sources = allowedSources(to);
    const fields: Record<string, unknown> = {
      status: next.status,
      version: next.version,
      updatedAt: next.updatedAt,
      activeSeconds: next.activeSeconds,
      runningSince: next.runningSince,
      pausedAt: next.pausedAt,
      endedAt: next.endedAt,
      pauseReason: next.pauseReason,
      errorMessage: next.errorMessage,
      ...changes,
    };
    return this.guardedWrite(current, next, fields, {
      clauses: {
        // The transition table, enforced by DynamoDB and not only by code.
        allowedTransition: sources.length > 0 ? `#status IN (${sources.map((_, i) => `:src${i}`).join(", ")})` : "attribute_not_exists(PK)",
      },
      values: Object.fromEntries(sources.map((src, i) => [`:src${i}`, src])),
      guard,
      // Same version, so the status is what the caller read: the table forbids this move.
      sameVersionFailure: (stored, cause) => new InvalidTransitionError(stored.status, to, { cause, context: { sessionId: current.id } }),
    });
  }

  async update(current: SessionRecord, wider: TransitionChanges, now: Date, guard?: LeaseGuard): Promise<SessionRecord> {
    const changes = pickTransitionChanges(wider);
    const next: SessionRecord = { ...current, ...changes, updatedAt: now.toISOString(), version: current.version + 1 };
    const nullSandbox = current.sandboxId === null;
    return this.guardedWrite(current, next, { ...changes, version: next.version, updatedAt: next.updatedAt }, {
      clauses: {
        // A field change never moves the status: that is what `transition` is for.
        sameStatus: "#status = :expectedStatus",
        // CAS on the sandbox the writer acted on (seed 002 §5b: `WHERE sandbox_id = fresh`).
        sameSandbox: nullSandbox ? "attribute_type(#sandboxId, :nullType) OR attribute_not_exists(#sandboxId)" : "#sandboxId = :expectedSandbox",
      },
      names: { "#sandboxId": "sandboxId" },
      values: { ":expectedStatus": current.status, ...(nullSandbox ? { ":nullType": "NULL" } : { ":expectedSandbox": current.sandboxId }) },
      guard,
      sameVersionFailure: (stored, cause) =>
        new StaleWriteError(`session ${current.id} changed under the writer (status ${stored.status}, sandbox ${stored.sandboxId ?? "none"})`, {
          cause,
          context: { sessionId: current.id },
        }),
    });
  }

  /**
   * The one conditional session write behind `transition` and `update`: SET `fields` (plus the
   * status index) if the session exists, still has `current.version`, meets the caller's extra
   * clauses and, with a guard, the caller still holds the lease. A failed condition is re-read
   * and mapped to the domain error that names the race that was lost.
   */
  private async guardedWrite(
    current: SessionRecord,
    next: SessionRecord,
    fieldValues: Record<string, unknown>,
    extra: {
      clauses: Record<string, string>;
      names?: Record<string, string>;
      values: Record<string, unknown>;
      guard: LeaseGuard | undefined;
      sameVersionFailure: (stored: SessionRecord, cause: unknown) => Error;
    },
  ): Promise<SessionRecord> {
    const { guard } = extra;
    const names: Record<string, string> = { "#status": "status", "#version": "version", ...extra.names };
    const values: Record<string, unknown> = { ":expectedVersion": current.version, ...extra.values };
    const fields = { ...fieldValues, ...keys.sessionByStatus(next.status, next.updatedAt, next.id) };
    const sets = Object.entries(fields).map(([field, value], i) => {
      names[`#f${i}`] = field;
      values[`:f${i}`] = value ?? null;
      return `#f${i} = :f${i}`;
    });
    if (guard) {
      names["#leaseOwner"] = "leaseOwner";
      names["#fence"] = "fence";
      values[":leaseOwner"] = guard.owner;
      values[":fence"] = guard.fence;
    }
    // The flow's commit also frees its lease (issue 15: one write, not a commit and a release),
    // and the relay lease the flow seized (pause, idle snapshot) if it asks to.
    const release = guard?.release === true;
    const releaseRelay = guard?.releaseRelay === true;
    const removed = [...(release ? ["#leaseOwner", "#leaseExpiresAt"] : []), ...(releaseRelay ? ["#relayOwner", "#relayExpiresAt"] : [])];
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(current.id),
          UpdateExpression: `SET ${sets.join(", ")}${removed.length ? ` REMOVE ${removed.join(", ")}` : ""}`,
          ConditionExpression: conditions({
            // The session must exist: an update must never create a half item.
            exists: "attribute_exists(PK)",
            // A stale writer (it read an older version) must not overwrite a newer state.
            sameVersion: "#version = :expectedVersion",
            ...extra.clauses,
            // A flow whose lease was taken over must commit nothing (seed 002 verification 18).
            ...(guard ? { leaseHeld: "#leaseOwner = :leaseOwner AND #fence = :fence" } : {}),
          }),
          ExpressionAttributeNames: {
            ...names,
            ...(release ? { "#leaseOwner": "leaseOwner", "#leaseExpiresAt": "leaseExpiresAt" } : {}),
            ...(releaseRelay ? { "#relayOwner": RELAY_SEIZE_ATTRIBUTES.owner, "#relayExpiresAt": RELAY_SEIZE_ATTRIBUTES.expiresAt } : {}),
          },
          ExpressionAttributeValues: values,
          // The record as stored after the write (fields the writer did not set included), and
          // on a failed condition the item as it was: no re-read either way (issue 15).
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return out.Attributes ? toRecord(out.Attributes) : next;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      // The item as it stood: from the failure itself, or read when the backend returns none (dynalite).
      const old = conditionFailureItem(err);
      const found = old ? { session: toRecord(old), lease: storedLeaseOf(old, FLOW_LEASE) } : await this.getSessionWithLease(current.id);
      if (!found) throw new NotFoundError(`session ${current.id} not found`, { cause: err });
      const stored = found.session;
      if (guard) {
        const lease = found.lease;
        if (lease.owner !== guard.owner || lease.fence !== guard.fence) {
          throw new LeaseLostError(`session ${current.id}: lease of ${guard.owner} (fence ${guard.fence}) is no longer held`, { cause: err });
        }
      }
      if (stored.version === current.version) throw extra.sameVersionFailure(stored, err);
      throw new StaleWriteError(
        `session ${current.id} changed concurrently (version ${stored.version}, expected ${current.version})`,
        { cause: err, context: { sessionId: current.id, expectedVersion: current.version, storedVersion: stored.version } },
      );
    }
  }

  async acquireLease(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<Lease> {
    return (await this.acquireLeaseWithSession(sessionId, owner, now, ttlSeconds)).lease;
  }

  async acquireLeaseWithSession(
    sessionId: string,
    owner: string,
    now: Date,
    ttlSeconds: number,
    options: { seizeRelay?: string } = {},
  ): Promise<{ lease: Lease; session: SessionRecord; relayLease?: RelayLease }> {
    const seizeRelay = options.seizeRelay;
    const { lease, item } = await this.lease.takeReturning(sessionId, owner, now, ttlSeconds, seizeRelay ? { attrs: RELAY_SEIZE_ATTRIBUTES, owner: seizeRelay } : undefined);
    if (lease && item) {
      const session = toRecord(item);
      if (!seizeRelay) return { lease, session };
      return { lease, session, relayLease: { sessionId, owner: seizeRelay, fence: Number(item[RELAY_SEIZE_ATTRIBUTES.fence]), expiresAt: lease.expiresAt } };
    }
    const held = item ? storedLeaseOf(item, FLOW_LEASE) : await this.readLease(sessionId);
    if (!held) throw new NotFoundError(`session ${sessionId} not found`);
    throw new LeaseBusyError(`session ${sessionId} is busy: lease held by ${held.owner ?? "?"} until ${new Date(held.expiresAt ?? 0).toISOString()}`, {
      context: { sessionId, holder: held.owner, expiresAt: held.expiresAt },
    });
  }

  async renewLease(lease: Lease, now: Date, ttlSeconds: number): Promise<Lease> {
    const renewed = await this.lease.renew(lease, now, ttlSeconds);
    if (renewed) return renewed;
    throw new LeaseLostError(`session ${lease.sessionId}: lease of ${lease.owner} (fence ${lease.fence}) was lost`);
  }

  releaseLease(lease: LeaseGuard): Promise<void> {
    return this.lease.release(lease);
  }

  async verifyLease(lease: LeaseGuard, now: Date): Promise<void> {
    const held = await this.readLease(lease.sessionId);
    if (!held) throw new NotFoundError(`session ${lease.sessionId} not found`);
    if (held.owner !== lease.owner || held.fence !== lease.fence || (held.expiresAt ?? 0) <= now.getTime()) {
      throw new LeaseLostError(`session ${lease.sessionId}: lease of ${lease.owner} (fence ${lease.fence}) is no longer held`, {
        context: { sessionId: lease.sessionId, holder: held.owner, fence: held.fence },
      });
    }
  }

  readLease(sessionId: string): Promise<{ owner: string | null; fence: number; expiresAt: number | null } | null> {
    return this.lease.read(sessionId);
  }

  async recordAgentState(sessionId: string, sandboxId: string, state: { busy: boolean; at: Date }): Promise<SessionRecord | null> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: state.busy ? "SET agentBusy = :true" : "SET agentBusy = :false, lastKnownAgentIdleAt = :at",
          ConditionExpression: conditions({
            exists: "attribute_exists(PK)",
            // A relay still watching a replaced sandbox must not describe the new one's agent.
            sameSandbox: "sandboxId = :sandboxId",
          }),
          ExpressionAttributeValues: state.busy ? { ":true": true, ":sandboxId": sandboxId } : { ":false": false, ":at": state.at.toISOString(), ":sandboxId": sandboxId },
          // The session as written: the relay arms the idle check from it without reading it again.
          ReturnValues: "ALL_NEW",
        }),
      );
      return toRecord(out.Attributes ?? {});
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  async recordAgentIdle(sessionId: string, sandboxId: string, at: Date): Promise<SessionRecord | null> {
    const write = async (withActivity: boolean) =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: `SET agentBusy = :false, lastKnownAgentIdleAt = :at${withActivity ? ", lastActivityAt = :at" : ""}`,
          ConditionExpression: conditions({
            exists: "attribute_exists(PK)",
            // As recordAgentState: a relay still watching a replaced sandbox must not describe the new one's agent.
            sameSandbox: "sandboxId = :sandboxId",
            // As touchActivity: activity only moves forward.
            ...(withActivity ? { monotonic: "lastActivityAt < :at" } : {}),
          }),
          ExpressionAttributeValues: { ":false": false, ":at": at.toISOString(), ":sandboxId": sandboxId },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
    try {
      return toRecord((await write(true)).Attributes ?? {});
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      // The item as the write found it (a read where the backend does not return it, as dynalite).
      const old = conditionFailureItem(err);
      const foundSandbox = old ? old.sandboxId : (await this.getSession(sessionId))?.sandboxId;
      // Gone, or another sandbox's now: nothing written.
      if (foundSandbox !== sandboxId) return null;
    }
    // Only the activity condition failed (a newer touch landed): the agent state alone.
    try {
      return toRecord((await write(false)).Attributes ?? {});
    } catch (err) {
      if (isConditionFailure(err)) return null;
      throw err;
    }
  }

  async touchActivity(sessionId: string, now: Date, options: { clientConnected?: boolean } = {}): Promise<void> {
    // Activity only moves forward: a delayed, older touch must not shorten the grace.
    // `$connect` counts the connection in the same write; the count is not monotonic in time, so
    // when the activity condition refuses the write, the count still lands (a second, rare write).
    const counted = await this.setForward(sessionId, "lastActivityAt", "lastActivityAt < :now", now, options.clientConnected ? "clientConnects" : undefined);
    if (options.clientConnected && !counted) {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: "ADD clientConnects :one",
          ConditionExpression: conditions({ exists: "attribute_exists(PK)" }),
          ExpressionAttributeValues: { ":one": 1 },
        }),
      );
    }
  }

  /** `resumeRequestedAt` is outside `SessionRecord` (internal, never in the session view). */
  async requestResume(sessionId: string, now: Date): Promise<void> {
    // Only forward: a delayed request must not hide a newer one from a flow comparing times.
    await this.setForward(sessionId, "resumeRequestedAt", "attribute_not_exists(resumeRequestedAt) OR resumeRequestedAt < :now", now);
  }

  /**
   * Sets a time attribute of the session item when `monotonic` holds (and adds one to `counter`
   * in the same write). A write refused by it is a documented no-op (a newer or equal time
   * already landed): false; only a missing session is an error.
   */
  private async setForward(sessionId: string, attribute: "lastActivityAt" | "resumeRequestedAt", monotonic: string, now: Date, counter?: "clientConnects"): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: `SET ${attribute} = :now${counter ? ` ADD ${counter} :one` : ""}`,
          ConditionExpression: conditions({ exists: "attribute_exists(PK)", monotonic }),
          ExpressionAttributeValues: { ":now": now.toISOString(), ...(counter ? { ":one": 1 } : {}) },
        }),
      );
      return true;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const stored = await this.getSession(sessionId);
      if (!stored) throw new NotFoundError(`session ${sessionId} not found`, { cause: err });
      return false;
    }
  }

  async readResumeRequest(sessionId: string): Promise<Date | null> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true, ProjectionExpression: "resumeRequestedAt" }),
    );
    const at = out.Item?.resumeRequestedAt;
    return typeof at === "string" ? new Date(at) : null;
  }

  /** Adds a queued prompt to `promptsEnqueued` alone, returning the item as the write left it. */
  private async countQueuedPrompt(sessionId: string, cause: unknown): Promise<{ session: SessionRecord; lease: StoredLease }> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: "ADD promptsEnqueued :one",
          ConditionExpression: conditions({ exists: "attribute_exists(PK)" }),
          ExpressionAttributeValues: { ":one": 1 },
          ReturnValues: "ALL_NEW",
        }),
      );
      const item = out.Attributes ?? {};
      return { session: toRecord(item), lease: storedLeaseOf(item, FLOW_LEASE) };
    } catch (err) {
      if (isConditionFailure(err)) throw new NotFoundError(`session ${sessionId} not found`, { cause });
      throw err;
    }
  }

  /** `touchActivity` that also returns the item (the prompt path: delivery then reads nothing). */
  async touchActivityReturning(sessionId: string, now: Date, options: { promptQueued?: boolean } = {}): Promise<{ session: SessionRecord; lease: StoredLease }> {
    const at = now.toISOString();
    const counts = options.promptQueued === true;
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: `SET lastActivityAt = :now${counts ? " ADD promptsEnqueued :one" : ""}`,
          ConditionExpression: conditions({
            exists: "attribute_exists(PK)",
            // Activity only moves forward: a delayed, older touch must not shorten the grace.
            monotonic: "lastActivityAt < :now",
          }),
          ExpressionAttributeValues: { ":now": at, ...(counts ? { ":one": 1 } : {}) },
          // The item as this write left it (or found it): the caller needs no read after the touch.
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      const item = out.Attributes ?? {};
      return { session: toRecord(item), lease: storedLeaseOf(item, FLOW_LEASE) };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      // The prompt is counted all the same (the activity time is not: a newer one landed).
      if (counts) return this.countQueuedPrompt(sessionId, err);
      // Documented no-op: a newer (or equal) touch already landed. Only a missing session is an error.
      const old = conditionFailureItem(err);
      const stored = old ? { session: toRecord(old), lease: storedLeaseOf(old, FLOW_LEASE) } : await this.getSessionWithLease(sessionId);
      if (!stored) throw new NotFoundError(`session ${sessionId} not found`, { cause: err });
      return stored;
    }
  }
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/**
 * A token's public id (issue 14 item 5): `tok_` + the first 20 hex characters (80 bits) of its
 * SHA-256. Safe to print, log and store beside connections (it is not the token and does not
 * open anything); derived, so tokens issued before ids existed have one too.
 */
export function apiTokenId(tokenHash: string): string {
  return `tok_${tokenHash.slice(0, 20)}`;
}

/** Token items written before roles existed have no `role`: they resolve as `member` (API.md "Roles"). */
const StoredToken = z.object({
  userId: z.string().min(1),
  orgId: z.string().min(1),
  role: z.enum(ROLES).default("member"),
  expiresAt: z.iso.datetime().nullish(),
  revokedAt: z.iso.datetime().nullish(),
  name: z.string().nullish(),
  createdAt: z.string().nullish(),
});

/** What an admin sees of a stored token: never the token or its hash. */
export interface TokenSummary {
  tokenId: string;
  userId: string;
  orgId: string;
  role: string;
  name: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
}

/** `tok_` + 8-64 hex characters (a token id or a unique prefix of one), or a whole `sbx_` token. */
const TOKEN_ID_REF = /^(?:tok_)?([0-9a-f]{8,64})$/;

/** API tokens: only the SHA-256 of a token is stored or looked up. */
export class DynamoApiTokenStore implements ApiTokenStore, TokenConnections {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  resolveToken(token: string, now: Date = new Date()): Promise<Principal | null> {
    return this.resolveTokenHash(hashToken(token), now);
  }

  async resolveTokenHash(tokenHash: string, now: Date): Promise<Principal | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.apiToken(tokenHash) }));
    if (!out.Item) return null;
    const parsed = StoredToken.safeParse(out.Item);
    if (!parsed.success || parsed.data.revokedAt) return null;
    const expiresAt = parsed.data.expiresAt ?? null;
    if (expiresAt !== null && Date.parse(expiresAt) <= now.getTime()) return null;
    return {
      userId: parsed.data.userId,
      orgId: parsed.data.orgId,
      role: parsed.data.role,
      credential: { tokenId: apiTokenId(tokenHash), tokenHash, expiresAt },
    };
  }

  async putToken(token: string, principal: NewTokenPrincipal, now: Date, options: { expiresAt?: Date } = {}): Promise<void> {
    const tokenHash = hashToken(token);
    const tokenId = apiTokenId(tokenHash);
    // The id lookup first: a stored token can always be found by its id (revocation relies on it).
    await this.doc.send(new PutCommand({ TableName: this.tableName, Item: { ...keys.apiTokenId(tokenId), tokenId, tokenHash } }));
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          ...keys.apiToken(tokenHash),
          tokenId,
          userId: principal.userId,
          orgId: principal.orgId,
          role: principal.role ?? "member",
          name: principal.name ?? null,
          createdAt: now.toISOString(),
          expiresAt: options.expiresAt ? options.expiresAt.toISOString() : null,
        },
      }),
    );
  }

  /**
   * The hash of the token a reference names: the token itself (`sbx_...`), its id (`tok_...`), or
   * a unique prefix of its id (at least 8 hex characters). An id without a lookup item (tokens
   * issued before ids existed) and a prefix are found by a Scan of token items: admin tooling
   * only, never on a request path. `ValidationError` for a malformed or ambiguous reference,
   * `NotFoundError` when nothing matches.
   */
  async findTokenHash(ref: string): Promise<string> {
    if (ref.startsWith("sbx_")) {
      const tokenHash = hashToken(ref);
      const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.apiToken(tokenHash) }));
      if (!out.Item) throw new NotFoundError("no API token matches that token");
      return tokenHash;
    }
    const hex = TOKEN_ID_REF.exec(ref)?.[1];
    if (!hex) throw new ValidationError("token: expected a token id (tok_ and hex), a prefix of one (at least 8 hex characters), or the token itself");
    if (hex.length === 20) {
      const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.apiTokenId(`tok_${hex}`) }));
      const tokenHash = (out.Item as { tokenHash?: unknown } | undefined)?.tokenHash;
      if (typeof tokenHash === "string") return tokenHash;
    }
    const matches: string[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: "begins_with(PK, :prefix) AND SK = :sk",
          ExpressionAttributeValues: { ":prefix": `${keys.apiTokenPrefix}${hex}`, ":sk": "APITOKEN" },
          ProjectionExpression: "PK",
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) matches.push(String(item.PK).slice(keys.apiTokenPrefix.length));
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    if (matches.length === 0) throw new NotFoundError(`no API token has an id starting tok_${hex}`);
    if (matches.length > 1) throw new ValidationError(`token: tok_${hex} matches ${matches.length} tokens; give more of the id`);
    return matches[0] as string;
  }

  /**
   * Revokes a token for good (idempotent: a second revoke keeps the first time). Every route and
   * `$connect` refuses it from then on (`resolveToken` returns null). Returns what was revoked.
   */
  async revoke(tokenHash: string, now: Date): Promise<TokenSummary> {
    try {
      const out = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.apiToken(tokenHash),
          UpdateExpression: "SET revokedAt = if_not_exists(revokedAt, :now)",
          // Revoking must not create a half token item for a hash nobody issued.
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: { ":now": now.toISOString() },
          ReturnValues: "ALL_NEW",
        }),
      );
      const item = StoredToken.parse(out.Attributes);
      return {
        tokenId: apiTokenId(tokenHash),
        userId: item.userId,
        orgId: item.orgId,
        role: item.role,
        name: item.name ?? null,
        expiresAt: item.expiresAt ?? null,
        revokedAt: item.revokedAt ?? null,
      };
    } catch (err) {
      if (isConditionFailure(err)) throw new NotFoundError("no such API token", { cause: err });
      throw err;
    }
  }

  async trackConnection(tokenId: string, connection: { connectionId: string; sessionId: string }, now: Date): Promise<void> {
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: { ...keys.apiTokenConnection(tokenId, connection.connectionId), ...connection, tokenId, connectedAt: now.toISOString() },
      }),
    );
  }

  async untrackConnection(tokenId: string, connectionId: string): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keys.apiTokenConnection(tokenId, connectionId) }));
  }

  /** The WebSocket connections opened with a token and not yet seen to disconnect. */
  async connectionsOf(tokenId: string): Promise<{ connectionId: string; sessionId: string }[]> {
    const found: { connectionId: string; sessionId: string }[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND begins_with(SK, :conn)",
          ExpressionAttributeValues: { ":pk": keys.apiTokenIdPartition(tokenId), ":conn": "CONN#" },
          ConsistentRead: true,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) found.push({ connectionId: String(item.connectionId), sessionId: String(item.sessionId) });
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return found;
  }

  /**
   * Marks a connection's lookup item revoked, so `$default` refuses its next frame and closes it
   * even when the revoke could not reach it. False when the connection is already gone.
   */
  async markConnectionRevoked(connectionId: string, now: Date): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.connectionLookup(connectionId),
          UpdateExpression: "SET revokedAt = :now",
          // A connection that already left must not be resurrected as a half item.
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: { ":now": now.toISOString() },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }
}
