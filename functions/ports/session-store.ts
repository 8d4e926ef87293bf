/**
 * Session store port. The one adapter (store/dynamo-session-store.ts) talks to DynamoDB in AWS
 * and to dynalite locally; all concurrency control is single-item conditional writes.
 */
import type { Principal, Role } from "../domain/principal";
import type { SessionRecord, SessionStatus } from "../domain/session";
import type { TransitionChanges } from "../domain/session-transitions";
import type { RelayLease } from "./relay";

export interface ListOptions {
  limit: number;
  cursor?: string | null;
  status?: SessionStatus | undefined;
}

export interface ListPage<T> {
  items: T[];
  nextCursor: string | null;
}

/** Condition added to a lifecycle write: the writer must still hold this lease. */
export interface LeaseGuard {
  sessionId: string;
  owner: string;
  /** Monotonic per session: every acquisition gets a larger fence than any before it. */
  fence: number;
  /** On a write (`transition`, `update`): the same write also frees the lease (a flow's commit). */
  release?: boolean;
  /**
   * On a write: the same write also frees the relay lease this flow seized (issue 15: no release
   * write in Finish). Only the flow lease's holder seizes, so its guarded commit frees its own seize.
   */
  releaseRelay?: boolean;
}

/** A held session lease: flows and the relay present it on every guarded write. */
export interface Lease extends LeaseGuard {
  /** Epoch milliseconds. */
  expiresAt: number;
}

export interface SessionStore {
  /**
   * Conditional put: fails with `ConflictError` if the id exists. `freshId`: the id was just
   * generated at random (domain/ids.ts `newSessionId`, 130 bits) and can exist nowhere, so the
   * session and its open-session marker go in one unconditional batch write (issue 15). An id
   * the caller chose or may reuse (the Slack worker's claimed id) keeps the condition.
   */
  createSession(record: SessionRecord, options?: { freshId?: boolean }): Promise<void>;
  getSession(sessionId: string): Promise<SessionRecord | null>;
  /**
   * How many of the org's sessions are open (not stopped), from the markers `createSession`
   * writes and a move to `stopped` deletes. `reconcile` first checks each marker against its
   * session and deletes those whose session is stopped or gone (a stop whose marker delete was
   * lost): exact, and bounded by the number of markers, so callers ask for it only at the cap.
   */
  countOpenSessions(orgId: string, options?: { reconcile?: boolean }): Promise<number>;
  /** An org's sessions, newest first. A cursor from another org or query is a `ValidationError`. */
  listSessionsByOrg(orgId: string, options: ListOptions): Promise<ListPage<SessionRecord>>;
  /** All sessions in one status (sweeper, operators), oldest update first. */
  listSessionsByStatus(status: SessionStatus, options: Omit<ListOptions, "status">): Promise<ListPage<SessionRecord>>;
  /** How many sessions are in `status` now (an index count, no items read; the metering pass's gauge). */
  countSessionsByStatus(status: SessionStatus): Promise<number>;
  /**
   * Moves `current` to `to` if, and only if, the stored item still has `current.version` and a
   * status from which the transition table allows `to`. A stale writer affects 0 items and gets
   * `StaleWriteError`; an illegal transition gets `InvalidTransitionError`; a missing session
   * `NotFoundError`. Returns the new record.
   */
  transition(
    current: SessionRecord,
    to: SessionStatus,
    now: Date,
    changes?: TransitionChanges,
    guard?: LeaseGuard,
  ): Promise<SessionRecord>;
  /**
   * Changes fields without a status change (a snapshot while running, an expiry migration's
   * sandbox swap, clearing a dead memory snapshot): a compare-and-set on the version, the
   * status and the `sandboxId` the caller read, plus the lease when `guard` is given. A stale
   * writer affects 0 items and gets `StaleWriteError` (or `LeaseLostError`). Returns the new record.
   */
  update(current: SessionRecord, changes: TransitionChanges, now: Date, guard?: LeaseGuard): Promise<SessionRecord>;
  /**
   * Takes the session lease (ARCHITECTURE.md §1: replaces the seed's Redis lock) if it is free,
   * expired, or already `owner`'s. `LeaseBusyError` while another owner holds a live lease.
   */
  acquireLease(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<Lease>;
  /**
   * `acquireLease`, returning the session as the same write left it (no read after the take).
   * `options.seizeRelay`: the same write also seizes the session's relay for that owner (as
   * `RelayLeaseStore.seize` does, issue 15: one write less per user pause), returned as `relayLease`.
   */
  acquireLeaseWithSession(
    sessionId: string,
    owner: string,
    now: Date,
    ttlSeconds: number,
    options?: { seizeRelay?: string },
  ): Promise<{ lease: Lease; session: SessionRecord; relayLease?: RelayLease }>;
  /** The session and its lease attributes from one strongly consistent read; null when it does not exist. */
  getSessionWithLease(sessionId: string): Promise<{ session: SessionRecord; lease: { owner: string | null; fence: number; expiresAt: number | null } } | null>;
  /** Extends a held lease; `LeaseLostError` if it is no longer the caller's. */
  renewLease(lease: Lease, now: Date, ttlSeconds: number): Promise<Lease>;
  /** Releases a held lease; a no-op if it was already taken over or released. */
  releaseLease(lease: LeaseGuard): Promise<void>;
  /**
   * The lease attributes as stored (strongly consistent): `owner` null when free; `fence` counts
   * every acquisition ever made, so it also serves as the session's flow generation.
   * Null when the session does not exist.
   */
  readLease(sessionId: string): Promise<{ owner: string | null; fence: number; expiresAt: number | null } | null>;
  /** Strongly consistent check before a destructive step; `LeaseLostError` if not still held and live. */
  verifyLease(lease: LeaseGuard, now: Date): Promise<void>;
  /**
   * The only writer of `lastActivityAt` (seed 002 constraint 4). Monotonic: an older `now` never
   * moves it back. Does not bump `version`, so activity never makes a lifecycle write stale.
   * `NotFoundError` if the session does not exist.
   */
  touchActivity(sessionId: string, now: Date, options?: { clientConnected?: boolean }): Promise<void>;
  /**
   * `touchActivity`, returning the session and its lease as the write left (or found) them: no read
   * after it. `promptQueued`: the caller stored a prompt just before; `promptsEnqueued` is added
   * to in the same write (in a second one when the activity time does not move).
   */
  touchActivityReturning(sessionId: string, now: Date, options?: { promptQueued?: boolean }): Promise<{ session: SessionRecord; lease: { owner: string | null; fence: number; expiresAt: number | null } }>;
  /**
   * The relay's view of the agent (seed 002 constraints 9, 10): `busy`, and on a busy -> idle
   * transition `lastKnownAgentIdleAt = at`. Like activity, never bumps `version`. Only written
   * while the session still references `sandboxId`, so a late relay cannot describe a newer
   * sandbox's agent. Returns the session as written (the relay arms an idle check from it without
   * a read), or null when that condition failed (nothing written).
   */
  recordAgentState(sessionId: string, sandboxId: string, state: { busy: boolean; at: Date }): Promise<SessionRecord | null>;
  /**
   * The relay's idle boundary in one write (issue 15: it was two, `touchActivity` then
   * `recordAgentState`): `agentBusy = false`, `lastKnownAgentIdleAt = at` and, moving only
   * forward, `lastActivityAt = at`. Returns the session as the write left it (the idle check is
   * armed from it: no read), or null when the session no longer references `sandboxId` or is gone
   * (nothing written). A newer activity time already stored stays (a second, rare write then
   * records the agent state alone).
   */
  recordAgentIdle(sessionId: string, sandboxId: string, at: Date): Promise<SessionRecord | null>;
  /**
   * Records that someone asked for the session to run at `now` (issue 25 §1: a resume that finds
   * the session still `running` while a pause, idle snapshot or migration is under way). A flow
   * that then commits `paused` resumes the session for it (`wake-waiters.ts`). Monotonic, never
   * bumps `version` (a lifecycle write in flight is not made stale). `NotFoundError` if missing.
   */
  requestResume(sessionId: string, now: Date): Promise<void>;
  /** When `requestResume` last recorded a request (strongly consistent); null if never. */
  readResumeRequest(sessionId: string): Promise<Date | null>;
}

/** What a new token is issued for: the role is optional (default `member`), the name is a label. */
export type NewTokenPrincipal = Omit<Principal, "role" | "credential"> & { role?: Role; name?: string };

export interface ApiTokenStore {
  /**
   * The principal for a raw bearer token, or null (unknown, revoked, or expired at `now`). Only
   * the token's SHA-256 is looked up.
   */
  resolveToken(token: string, now?: Date): Promise<Principal | null>;
  /**
   * Stores a token's hash with its principal (admin tooling and the local runtime's dev token).
   * The role defaults to `member` (API.md "Roles"); no `expiresAt`: the token never expires.
   */
  putToken(token: string, principal: NewTokenPrincipal, now: Date, options?: { expiresAt?: Date }): Promise<void>;
}

/**
 * The WebSocket connections opened with each API token (issue 14 item 5), so revoking a token can
 * find and close them. Registered at `$connect`, forgotten at `$disconnect`; both idempotent.
 */
export interface TokenConnections {
  /** `resolveToken` by the token's SHA-256 (a connect ticket re-checks the token it was minted with). */
  resolveTokenHash(tokenHash: string, now: Date): Promise<Principal | null>;
  trackConnection(tokenId: string, connection: { connectionId: string; sessionId: string }, now: Date): Promise<void>;
  untrackConnection(tokenId: string, connectionId: string): Promise<void>;
}
