/**
 * Session store port. The one adapter (store/dynamo-session-store.ts) talks to DynamoDB in AWS
 * and to dynalite locally; all concurrency control is single-item conditional writes.
 */
import type { Principal } from "../domain/principal";
import type { SessionRecord, SessionStatus } from "../domain/session";
import type { TransitionChanges } from "../domain/session-transitions";

export interface ListOptions {
  limit: number;
  cursor?: string | null;
  status?: SessionStatus | undefined;
}

export interface ListPage<T> {
  items: T[];
  nextCursor: string | null;
}

export interface SessionStore {
  /** Conditional put: fails with `ConflictError` if the id exists. */
  createSession(record: SessionRecord): Promise<void>;
  getSession(sessionId: string): Promise<SessionRecord | null>;
  /** An org's sessions, newest first. A cursor from another org or query is a `ValidationError`. */
  listSessionsByOrg(orgId: string, options: ListOptions): Promise<ListPage<SessionRecord>>;
  /** All sessions in one status (sweeper, operators), oldest update first. */
  listSessionsByStatus(status: SessionStatus, options: Omit<ListOptions, "status">): Promise<ListPage<SessionRecord>>;
  /**
   * Moves `current` to `to` if, and only if, the stored item still has `current.version` and a
   * status from which the transition table allows `to`. A stale writer affects 0 items and gets
   * `StaleWriteError`; an illegal transition gets `InvalidTransitionError`; a missing session
   * `NotFoundError`. Returns the new record.
   */
  transition(current: SessionRecord, to: SessionStatus, now: Date, changes?: TransitionChanges): Promise<SessionRecord>;
  /**
   * The only writer of `lastActivityAt` (seed 002 constraint 4). Monotonic: an older `now` never
   * moves it back. Does not bump `version`, so activity never makes a lifecycle write stale.
   * `NotFoundError` if the session does not exist.
   */
  touchActivity(sessionId: string, now: Date): Promise<void>;
}

export interface ApiTokenStore {
  /** The principal for a raw bearer token, or null. Only the token's SHA-256 is looked up. */
  resolveToken(token: string): Promise<Principal | null>;
  /** Stores a token's hash with its principal (admin tooling and the local runtime's dev token). */
  putToken(token: string, principal: Principal & { name?: string }, now: Date): Promise<void>;
}
