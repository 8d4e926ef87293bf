/**
 * The session store over DynamoDB (dynalite locally). Key layout: ./table-layout.ts.
 * Every lifecycle write is a conditional write built from named clauses; a failed condition is
 * re-read and mapped to a domain error. Other SDK errors propagate unchanged.
 */
import {
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type QueryCommandInput,
} from "@aws-sdk/lib-dynamodb";
import { createHash } from "node:crypto";
import * as z from "zod";
import { ConflictError, InvalidTransitionError, LeaseBusyError, LeaseLostError, NotFoundError, StaleWriteError, ValidationError } from "../domain/errors";
import { ROLES, type Principal } from "../domain/principal";
import { SessionRecord, type SessionStatus } from "../domain/session";
import { allowedSources, applyTransition, pickTransitionChanges, type TransitionChanges } from "../domain/session-transitions";
import type { ApiTokenStore, Lease, LeaseGuard, ListOptions, ListPage, NewTokenPrincipal, SessionStore } from "../ports/session-store";
import { GSI_BY_ORG, GSI_BY_STATUS, keys } from "./table-layout";
import { ItemLease, conditions, isConditionFailure, stripKeys } from "./item-lease";

function toRecord(item: Record<string, unknown>): SessionRecord {
  return SessionRecord.parse(stripKeys(item));
}

const CursorKey = z.record(z.string(), z.string());

function encodeCursor(key: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(key)).toString("base64url");
}

function decodeCursor(cursor: string, expected: { attribute: string; value: string }): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
  }
  const key = CursorKey.safeParse(parsed);
  // A cursor from another org or another listing must not steer the query elsewhere.
  if (!key.success || key.data[expected.attribute] !== expected.value) {
    throw new ValidationError("cursor: not a cursor returned by this API", "invalid_cursor");
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
  ) {
    this.lease = new ItemLease(doc, tableName, { owner: "leaseOwner", expiresAt: "leaseExpiresAt", fence: "fence" });
  }

  async createSession(record: SessionRecord): Promise<void> {
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            ...keys.session(record.id),
            ...keys.sessionByOrg(record.orgId, record.createdAt, record.id),
            ...keys.sessionByStatus(record.status, record.updatedAt, record.id),
            ...record,
          },
          // Two creates with one id must not overwrite each other.
          ConditionExpression: conditions({ isNew: "attribute_not_exists(PK)" }),
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) throw new ConflictError(`session ${record.id} already exists`, { cause: err });
      throw err;
    }
  }

  async getSession(sessionId: string): Promise<SessionRecord | null> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true }),
    );
    return out.Item ? toRecord(out.Item) : null;
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

  private async listPage(
    base: Omit<QueryCommandInput, "TableName">,
    cursorScope: { attribute: string; value: string },
    keyAttributes: string[],
    options: ListOptions,
  ): Promise<ListPage<SessionRecord>> {
    let startKey: Record<string, unknown> | undefined = options.cursor ? decodeCursor(options.cursor, cursorScope) : undefined;
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
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(current.id),
          UpdateExpression: `SET ${sets.join(", ")}`,
          ConditionExpression: conditions({
            // The session must exist: an update must never create a half item.
            exists: "attribute_exists(PK)",
            // A stale writer (it read an older version) must not overwrite a newer state.
            sameVersion: "#version = :expectedVersion",
            ...extra.clauses,
            // A flow whose lease was taken over must commit nothing (seed 002 verification 18).
            ...(guard ? { leaseHeld: "#leaseOwner = :leaseOwner AND #fence = :fence" } : {}),
          }),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
      );
      return next;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const stored = await this.getSession(current.id);
      if (!stored) throw new NotFoundError(`session ${current.id} not found`, { cause: err });
      if (guard) {
        const lease = await this.readLease(current.id);
        if (lease?.owner !== guard.owner || lease.fence !== guard.fence) {
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
    const lease = await this.lease.take(sessionId, owner, now, ttlSeconds);
    if (lease) return lease;
    const held = await this.readLease(sessionId);
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

  async recordAgentState(sessionId: string, sandboxId: string, state: { busy: boolean; at: Date }): Promise<boolean> {
    try {
      await this.doc.send(
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
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async touchActivity(sessionId: string, now: Date): Promise<void> {
    const at = now.toISOString();
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: "SET lastActivityAt = :now",
          ConditionExpression: conditions({
            exists: "attribute_exists(PK)",
            // Activity only moves forward: a delayed, older touch must not shorten the grace.
            monotonic: "lastActivityAt < :now",
          }),
          ExpressionAttributeValues: { ":now": at },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      // Documented no-op: a newer (or equal) touch already landed. Only a missing session is an error.
      const stored = await this.getSession(sessionId);
      if (!stored) throw new NotFoundError(`session ${sessionId} not found`, { cause: err });
    }
  }
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Token items written before roles existed have no `role`: they resolve as `member` (API.md "Roles"). */
const StoredToken = z.object({ userId: z.string().min(1), orgId: z.string().min(1), role: z.enum(ROLES).default("member") });

/** API tokens: only the SHA-256 of a token is stored or looked up. */
export class DynamoApiTokenStore implements ApiTokenStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async resolveToken(token: string): Promise<Principal | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.apiToken(hashToken(token)) }));
    if (!out.Item || out.Item.revokedAt) return null;
    const parsed = StoredToken.safeParse(out.Item);
    return parsed.success ? { userId: parsed.data.userId, orgId: parsed.data.orgId, role: parsed.data.role } : null;
  }

  async putToken(token: string, principal: NewTokenPrincipal, now: Date): Promise<void> {
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          ...keys.apiToken(hashToken(token)),
          userId: principal.userId,
          orgId: principal.orgId,
          role: principal.role ?? "member",
          name: principal.name ?? null,
          createdAt: now.toISOString(),
        },
      }),
    );
  }
}
