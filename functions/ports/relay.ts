/**
 * Relay lease port (ARCHITECTURE.md §1 "Streaming relay"): which relay process holds a running
 * session's SSE stream. It lives on the session item but is separate from the flow lease
 * (`relayOwner`, `relayExpiresAt`, `relayFence`): a flow pausing a session and the relay
 * watching it must not block each other. At most one live relay per session, so clients get
 * each delta once and one actor completes each turn. One adapter (store/dynamo-relay-store.ts).
 */

/** A held relay lease. `fence` grows with every claim, so a stale holder can be told apart. */
export interface RelayLease {
  sessionId: string;
  owner: string;
  fence: number;
  /** Epoch milliseconds. */
  expiresAt: number;
}

export interface RelayLeaseStore {
  /**
   * Takes the relay lease if it is free, expired, or already `owner`'s; null while another owner
   * holds a live one. `NotFoundError` when the session does not exist.
   */
  claim(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease | null>;
  /**
   * Takes the relay lease away from whichever relay holds it (seed 002 constraint 12, §5b step 5):
   * an idle snapshot holds it while it snapshots, so the holder's next renewal fails and it closes
   * the stream and cancels its pending reconnects, and no relay claims the session meanwhile.
   * Released like any lease. `NotFoundError` when the session does not exist.
   */
  seize(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease>;
  /** Extends a held lease; `LeaseLostError` if it is no longer the caller's (same owner and fence). */
  renew(lease: RelayLease, now: Date, ttlSeconds: number): Promise<RelayLease>;
  /** Frees a held lease; a no-op if it was already released or taken over. */
  release(lease: RelayLease): Promise<void>;
  /**
   * Running sessions whose relay lease is free or expired at `now`, oldest update first: the
   * candidates a relay scan tries to claim (a filter, so held sessions cost no failed write).
   */
  listClaimable(now: Date, options: { limit: number; cursor?: string | null }): Promise<{ sessionIds: string[]; nextCursor: string | null }>;
  /**
   * Whether a live relay watches the session at `now` (strongly consistent). Prompt delivery
   * waits for one: a turn started before any relay listens would stream to nobody.
   */
  watched(sessionId: string, now: Date): Promise<boolean>;
}
