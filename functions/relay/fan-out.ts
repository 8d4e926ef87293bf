/**
 * One held session's fan-out to its WebSocket clients (issue 25 leftovers): no client that joins
 * mid-turn misses a frame, and a frame costs no DynamoDB read in steady state.
 *
 * The connection list is read when the relay claims the session (`prefetch`, beside the stream's
 * connect) and reused; it is read again when a client joined (send-init nudges the relay once the
 * new connection is ready: in process locally, over the nudge queue in AWS), when a listed
 * connection's expiry passed (the fresh item decides: its client may have refreshed it), or every
 * `cacheMs` as the backstop for a lost nudge. Only the expiry's read holds up the event's frames:
 * a join's or the backstop's is applied between two events once it is back (a later read applied
 * first wins), and the claim's is awaited only by a first frame that comes before it is back. So a
 * turn's frames wait for no DynamoDB read. A
 * connection seen ready for the first time is a joiner: before it gets any frame it is brought up
 * to date with the turn in progress (each open message as `message.create` with its content so
 * far, `EventTranslator.openFrames`) and with the messages finalized since it connected (its
 * `init` may have read the transcript before they were stored: `message.create` + `message.finalize`
 * again, which clients treat as idempotent, README "WebSocket"). Only then does it join the
 * frames that follow.
 *
 * That is exact because the catch-up and the relay's handling of an event never interleave
 * (`exclusive`): the catch-up describes the state after every frame sent so far, and the joiner
 * gets every frame after it. A connection that the push reports gone is dropped from the list and
 * the registry without a read; one whose item a read found expired, at that read (from the
 * registry beside the frames), so that no later event reads the list again for it.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { isLiveConnection } from "../domain/connection-liveness";
import { errorForLog } from "../observability/logger";
import type { ClientPush } from "../ports/client-push";
import type { ClientConnection, ConnectionRegistry } from "../ports/session-items";
import { broadcast } from "../services/broadcast";
import type { RelayClientMessage } from "./event-translator";

export interface FanOutDeps {
  connections: ConnectionRegistry;
  push: ClientPush;
  logger: Logger;
  now: () => Date;
}

type Frame = { type: string } & Record<string, unknown>;

/** Default backstop: the list is read again at most this often without a join nudge. */
export const CONNECTION_RELIST_MS = 30_000;
/** Finalized messages a joiner may have missed are remembered this long (and at most RECENT_FINALS of them). */
const RECENT_FINAL_MS = 120_000;
const RECENT_FINALS = 20;
/** Clock skew allowed between the process that registered a connection and this relay. */
const SKEW_MS = 5_000;

/** One read of the connection list: its order among the reads, and when it was issued. */
interface ListRead {
  seq: number;
  at: number;
  list: Promise<ClientConnection[]>;
}

export class SessionFanOut {
  private list: ClientConnection[] | null = null;
  private listedAt = 0;
  /** Ready connections that have everything sent so far: each frame goes to them. */
  private readonly synced = new Set<string>();
  private readonly finals: { at: number; create: Frame; finalize: Frame }[] = [];
  private chain: Promise<void> = Promise.resolve();
  /** Reads issued, the newest one applied, and the newest one still in flight. */
  private issued = 0;
  private applied = 0;
  private inFlight: ListRead | null = null;
  /** Connection list reads (bench and tests). */
  reads = 0;

  constructor(
    private readonly deps: FanOutDeps,
    private readonly sessionId: string,
    private readonly options: { cacheMs?: number; openFrames: () => RelayClientMessage[] },
  ) {}

  /** Runs `fn` alone among this session's exclusive work: the relay's handling of each event, and a join's catch-up. */
  exclusive(fn: () => Promise<void>): Promise<void> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * A stream was opened (a claim): the list is read now, beside the stream's connect and catch-up,
   * so that a turn's first frame finds it read instead of waiting for a Query.
   */
  prefetch(): Promise<void> {
    if (this.list !== null || this.inFlight) return Promise.resolve();
    return this.applyWhenRead(this.read());
  }

  /**
   * A client joined (the relay was nudged): the list is read again, off the session's event path
   * (frames go on to the clients already caught up meanwhile), and the joiner is caught up
   * between two events once the read is back. A read issued before the nudge may not list the
   * joiner, so this one is always new.
   */
  joined(): Promise<void> {
    return this.applyWhenRead(this.read()).catch((err: unknown) => {
      // The next event reads it again (the backstop's read, due at once).
      this.listedAt = Number.NEGATIVE_INFINITY;
      throw err;
    });
  }

  /** The list was read at least once: something was (or is being) sent, or a client joined. */
  get listed(): boolean {
    return this.list !== null;
  }

  /**
   * Before an event (inside `exclusive`). Waits for a read only when the list must be current for
   * this event's frames: none was read yet (one in flight, e.g. the claim's, is awaited rather
   * than repeated), or a listed connection's expiry passed (its fresh item decides: the client may
   * have refreshed it). The backstop re-read every `cacheMs` (for a lost join nudge) runs beside
   * the frames and catches up whoever it finds once it is back.
   */
  async sync(): Promise<void> {
    const now = this.deps.now();
    if (this.list === null) return this.apply(this.inFlight ?? this.read());
    if (!this.list.every((c) => isLiveConnection(c, now))) return this.apply(this.read());
    if (now.getTime() - this.listedAt < (this.options.cacheMs ?? CONNECTION_RELIST_MS) || this.inFlight) return;
    this.applyWhenRead(this.read()).catch((err: unknown) => {
      // The list stays as it was; the next event tries again.
      this.deps.logger.warn("connection list read failed", { sessionId: this.sessionId, error: errorForLog(err) });
    });
  }

  private read(): ListRead {
    this.reads++;
    const read: ListRead = { seq: ++this.issued, at: this.deps.now().getTime(), list: this.deps.connections.list(this.sessionId) };
    this.inFlight = read;
    const settled = () => {
      if (this.inFlight === read) this.inFlight = null;
    };
    read.list.then(settled, settled);
    return read;
  }

  /** Waits for the read outside the session's exclusive work, then applies it inside. */
  private async applyWhenRead(read: ListRead): Promise<void> {
    await read.list;
    await this.exclusive(() => this.apply(read));
  }

  /**
   * Inside `exclusive`: makes the read the list, unless a later read was applied already, and
   * catches its joiners up. Nothing sent yet (the first frame's read, or the claim's): nobody
   * has had a frame, so the ready connections join as they are, from the next frame on.
   */
  private async apply(read: ListRead): Promise<void> {
    const list = await read.list;
    if (read.seq <= this.applied) return;
    this.applied = read.seq;
    const catchUp = this.list !== null;
    // An item expired when it was read is expired (the read is what decides; judged at the read's
    // time, so a read that comes back late removes no client that refreshed meanwhile): it leaves
    // the list, so no later event reads the list again for it, and the registry, beside the
    // frames (the next read removes it again if that failed). A client that vanished without a
    // `$disconnect` and never got a frame (an aborted handshake: no `init`) is removed nowhere else.
    const readAt = new Date(read.at);
    const expired = list.filter((c) => !isLiveConnection(c, readAt));
    this.list = expired.length === 0 ? list : list.filter((c) => isLiveConnection(c, readAt));
    this.listedAt = read.at;
    for (const c of expired) this.forget(c.connectionId);
    const listed = new Set(this.list.map((c) => c.connectionId));
    for (const id of this.synced) if (!listed.has(id)) this.synced.delete(id);
    const now = this.deps.now();
    const joiners = this.list.filter((c) => c.ready && !this.synced.has(c.connectionId) && isLiveConnection(c, now));
    if (joiners.length === 0) return;
    if (!catchUp) {
      for (const c of joiners) this.synced.add(c.connectionId);
      return;
    }
    const open = this.options.openFrames();
    await Promise.all(
      joiners.map(async (c) => {
        const since = Date.parse(c.connectedAt) - SKEW_MS;
        const missed = this.finals.filter((f) => f.at >= since).flatMap((f) => [f.create, f.finalize]);
        try {
          for (const frame of [...missed, ...open]) {
            if ((await this.deps.push.send(c.connectionId, frame)) === "gone") {
              await this.drop(c.connectionId);
              return;
            }
          }
          this.synced.add(c.connectionId);
        } catch (err) {
          // Not caught up: it is tried again at the next read.
          this.deps.logger.warn("push failed", { sessionId: this.sessionId, connectionId: c.connectionId, error: errorForLog(err) });
        }
      }),
    );
  }

  /** One frame to every caught-up client, in order (`broadcast`, with the list as read). */
  async send(message: Frame): Promise<void> {
    // The first frame: the list must be read (the claim's read, if it is not back yet).
    if (this.list === null) await this.sync();
    if (message.type === "message.finalize" && typeof message.messageId === "string") this.rememberFinal(message);
    const connections = (this.list ?? []).filter((c) => this.synced.has(c.connectionId));
    const registry = this.deps.connections;
    const remove = async (_sessionId: string, connectionId: string): Promise<void> => this.drop(connectionId);
    const deps = { ...this.deps, connections: Object.assign(Object.create(registry) as ConnectionRegistry, { remove }) };
    await broadcast(deps, this.sessionId, message, { connections });
  }

  private rememberFinal(message: Frame): void {
    const at = this.deps.now().getTime();
    while (this.finals.length >= RECENT_FINALS || (this.finals[0] && at - this.finals[0].at > RECENT_FINAL_MS)) this.finals.shift();
    this.finals.push({ at, create: { type: "message.create", messageId: message.messageId, role: "assistant" }, finalize: message });
  }

  /** An expired connection's items are deleted without holding up the session's frames. */
  private forget(connectionId: string): void {
    this.deps.connections.remove(this.sessionId, connectionId).catch((err: unknown) => {
      this.deps.logger.warn("expired connection not removed", { sessionId: this.sessionId, connectionId, error: errorForLog(err) });
    });
  }

  private async drop(connectionId: string): Promise<void> {
    this.synced.delete(connectionId);
    if (this.list) this.list = this.list.filter((c) => c.connectionId !== connectionId);
    await this.deps.connections.remove(this.sessionId, connectionId);
  }
}
