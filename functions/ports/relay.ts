/**
 * Relay ownership port (ARCHITECTURE.md §9 "Relay at scale", issue 15): which relay process
 * streams a running session. Liveness belongs to the relay process, not to each stream:
 *
 * - one heartbeat item per relay process (owner id, epoch, expiry), renewed by one write per
 *   period (`RelayHeartbeat`); an epoch whose heartbeat expired (or was released) never lives
 *   again: the process registers a new epoch;
 * - a watched session names its relay, epoch and sandbox (`relayOwner`, `relayEpoch`,
 *   `relaySandbox`), written once at claim and never renewed; `relayFence` grows with every
 *   claim and seize;
 * - takeover is a conditional write that succeeds only while the session still names the relay
 *   the claimer found dead (its heartbeat expired, released, or of an older epoch), a claim
 *   bound to another sandbox than the session's (resume, migration), or nobody;
 * - an idle snapshot seizes the session (seed 002 constraint 12): owner `flow:<execution>` with
 *   an expiry, so no relay claims it while the flow works.
 *
 * One adapter (store/dynamo-relay-store.ts). The flows tell the relays about a change through
 * `RelayNudge` (in process locally; in AWS a message on the SQS nudge queue the relays long-poll).
 */

/** A session watched by a relay process, as written at claim. */
export interface RelayClaim {
  sessionId: string;
  owner: string;
  epoch: number;
  /** The sandbox the claim is for: a session on another sandbox is claimable again. */
  sandboxId: string;
  fence: number;
}

/** A claim and the session as the claim's write left it (what to stream from): no read after the write. */
export type ClaimedSession = RelayClaim & { session: ClaimView };

/** A page of claimable sessions, each as the listing saw it (eventually consistent: a claim from it is checked by its condition). */
export interface ClaimablePage {
  /** Each session with what a claim needs. */
  sessions: ClaimView[];
  nextCursor: string | null;
}

/** A flow's seize of the session (idle snapshot): held until released or `expiresAt`. */
export interface RelayLease {
  sessionId: string;
  owner: string;
  fence: number;
  /** Epoch milliseconds. */
  expiresAt: number;
}

/** One relay process's liveness. */
export interface RelayHeartbeat {
  owner: string;
  epoch: number;
  /** Epoch milliseconds. */
  expiresAt: number;
}

/** A session as a claimer sees it (strongly consistent): its runtime and who watches it. */
export interface ClaimView {
  sessionId: string;
  status: string;
  sandboxId: string | null;
  openCodeUrl: string | null;
  codingAgentSessionId: string | null;
  relayOwner: string | null;
  relayEpoch: number | null;
  relaySandbox: string | null;
  relayFence: number;
  /** Only for a flow's seize. */
  relayExpiresAt: number | null;
}

export interface RelayLeaseStore {
  /** A new epoch of `owner`'s heartbeat (a restarted process never revives its old epoch). */
  register(owner: string, now: Date, ttlSeconds: number): Promise<RelayHeartbeat>;
  /**
   * One write: extends the heartbeat. `LeaseLostError` when it expired before this renewal or was
   * released (another relay may hold its sessions now: drop them all and register again).
   */
  beat(heartbeat: RelayHeartbeat, now: Date, ttlSeconds: number): Promise<RelayHeartbeat>;
  /** Draining: the heartbeat ends now, so every session naming it is claimable at once. */
  retire(heartbeat: RelayHeartbeat): Promise<void>;
  /** Heartbeats live at `now` (one Query of the relays' partition): owner -> epoch. */
  liveRelays(now: Date): Promise<Map<string, number>>;
  /** The session as a claimer sees it; null when it does not exist. */
  view(sessionId: string): Promise<ClaimView | null>;
  /**
   * Claims the session for `heartbeat` on the sandbox in `seen`, if it is still what `seen` shows
   * (running on that sandbox, same fence) and free: nobody, a dead relay, a claim for another
   * sandbox, an expired seize, or `heartbeat`'s own. Null otherwise (another live relay, a live
   * seize, or the session changed since `seen`).
   */
  claim(seen: ClaimView, heartbeat: RelayHeartbeat, now: Date, live?: Map<string, number>): Promise<ClaimedSession | null>;
  /** Frees a relay's claim; a no-op if it was taken over or released already. */
  releaseClaim(claim: RelayClaim): Promise<void>;
  /**
   * Takes the session away from whichever relay watches it (seed 002 constraint 12, §5b step 5):
   * an idle snapshot holds it while it snapshots, so no relay claims it, and the holder stops at
   * its next revalidation (a reconnect, a nudge). `NotFoundError` when the session does not exist.
   */
  seize(sessionId: string, owner: string, now: Date, ttlSeconds: number): Promise<RelayLease>;
  /** Frees a seize; a no-op if it was already released or taken over. */
  release(lease: RelayLease): Promise<void>;
  /**
   * Running sessions a relay may claim at `now` (no live relay on their current sandbox, no live
   * seize), oldest update first: the backstop scan.
   */
  listClaimable(now: Date, options: { limit: number; cursor?: string | null; live?: Map<string, number> }): Promise<ClaimablePage>;
  /**
   * Running sessions naming relay `owner` (any epoch) that a relay may claim at `now`: what a
   * peer that died or retired held (a takeover reads these, not every running session). Eventually
   * consistent, like the scan: the claim's conditional write decides.
   */
  listHeldBy(owner: string, now: Date, options: { limit: number; cursor?: string | null; live?: Map<string, number> }): Promise<ClaimablePage>;
  /**
   * Whether a live relay watches the session's current sandbox (or a flow holds a live seize) at
   * `now`, strongly consistent. Prompt delivery waits for one: a turn started before any relay
   * listens would stream to nobody.
   */
  watched(sessionId: string, now: Date): Promise<boolean>;
}

/**
 * Tells the relays that a session changed (a flow committed, a prompt found it unwatched): the
 * relay watching it revalidates (drops it when it no longer runs there, reopens on a new
 * runtime); a running session nobody watches is claimed at once. Best effort: the relays' scan
 * is the backstop. Locally in process; in AWS a message on the nudge queue the relays long-poll
 * (adapters/aws/sqs-relay-nudge.ts).
 */
export interface RelayNudge {
  nudge(sessionId: string): Promise<void>;
}

/** The relay whose heartbeat a handover nudge says was retired. */
export interface RetiredRelay {
  owner: string;
  epoch: number;
}

/**
 * A draining relay's handover (issue 15: "a draining relay hands its sessions over at once"):
 * once its heartbeat is retired, one nudge per session it held, naming the retired heartbeat, so
 * a peer claims each at once instead of at its next heartbeat round. Best effort: the peers'
 * heartbeat rounds and the backstop cover a nudge lost. AWS: the nudge queue, 10 a
 * SendMessageBatch; locally: the successor relay in process.
 */
export interface RelayHandover {
  handover(from: RetiredRelay, sessionIds: readonly string[]): Promise<void>;
}

/** One nudge as a relay received it (AWS: an SQS message). */
export interface ReceivedNudge {
  sessionId: string;
  /** How often the message was received, this time included. */
  receiveCount: number;
  /** A draining relay's handover: its heartbeat was retired (checked again at claim, never trusted alone). */
  retired?: RetiredRelay;
  /** Handled: never delivered again. */
  done(): Promise<void>;
  /** Not for this relay (another live relay holds the session): deliver it again, to any relay. */
  leave(): Promise<void>;
}

/** Where a relay receives nudges from in AWS (locally nudges are direct calls). */
export interface NudgeSource {
  /** The nudges waiting (long-polled: may wait for the first one); `signal` ends the wait. */
  receive(signal?: AbortSignal): Promise<ReceivedNudge[]>;
}

/**
 * The other relays of this process (one per worker thread, functions/relay/workers.ts), told of
 * each session a relay starts or stops holding, so that a scan skips what a sibling holds instead
 * of going for it (relays scanning together, at start and when a peer dies, otherwise each went
 * for every listed session: bench 5a, 4 workers, 5.7 GetItem per claim before claims were
 * written from the page), and walks its own share of a page first. A hint only: whether a relay
 * holds a session is decided by the conditional claim, as between processes.
 */
export interface RelaySiblings {
  /** The session is in this relay's share of the process (a scan claims those first). */
  mine(sessionId: string): boolean;
  /** Another relay of this process said it holds the session (and has not said it dropped it). */
  heldElsewhere(sessionId: string): boolean;
  holds(sessionId: string): void;
  dropped(sessionId: string): void;
}
