/**
 * One held session's fan-out to its WebSocket clients (issue 25 leftovers): no client that joins
 * mid-turn misses a frame, and a frame costs no DynamoDB read in steady state.
 *
 * The connection list is read once and reused; it is read again only before an event when a
 * client joined (send-init nudges the relay once the new connection is ready: in process locally,
 * over the nudge queue in AWS), when a listed connection's expiry passed (the fresh item decides:
 * its client may have refreshed it), or every `cacheMs` as the backstop for a lost nudge. A
 * connection seen ready for the first time is a joiner: before it gets any frame it is brought up
 * to date with the turn in progress (each open message as `message.create` with its content so
 * far, `EventTranslator.openFrames`) and with the messages finalized since it connected (its
 * `init` may have read the transcript before they were stored: `message.create` + `message.finalize`
 * again, which clients treat as idempotent, README "WebSocket"). Only then does it join the
 * frames that follow.
 *
 * That is exact because the catch-up and the relay's handling of an event never interleave
 * (`exclusive`): the catch-up describes the state after every frame sent so far, and the joiner
 * gets every frame after it. A connection that the push reports gone (or whose item expired) is
 * dropped from the list and the registry, without a read.
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

export class SessionFanOut {
  private list: ClientConnection[] | null = null;
  private listedAt = 0;
  private joinSeen = false;
  /** Ready connections that have everything sent so far: each frame goes to them. */
  private readonly synced = new Set<string>();
  private readonly finals: { at: number; create: Frame; finalize: Frame }[] = [];
  private chain: Promise<void> = Promise.resolve();
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

  /** A client joined (the relay was nudged): the list is read again and the joiner caught up now, between two events. */
  joined(): Promise<void> {
    this.joinSeen = true;
    return this.exclusive(() => this.sync());
  }

  /** The list was read at least once: something was (or is being) sent, or a client joined. */
  get listed(): boolean {
    return this.list !== null;
  }

  /**
   * Before an event (inside `exclusive`): read the list if it may be out of date, and catch
   * joiners up. `catchUp: false` (the first frame ever sent): nobody has had a frame yet, so the
   * ready connections join as they are, from this frame on.
   */
  async sync(options: { catchUp?: boolean } = {}): Promise<void> {
    const now = this.deps.now();
    const fresh = this.list !== null && !this.joinSeen && now.getTime() - this.listedAt < (this.options.cacheMs ?? CONNECTION_RELIST_MS);
    if (fresh && this.list?.every((c) => isLiveConnection(c, now))) return;
    this.joinSeen = false;
    this.reads++;
    const list = await this.deps.connections.list(this.sessionId);
    this.list = list;
    this.listedAt = now.getTime();
    const listed = new Set(list.map((c) => c.connectionId));
    for (const id of this.synced) if (!listed.has(id)) this.synced.delete(id);
    const joiners = list.filter((c) => c.ready && !this.synced.has(c.connectionId) && isLiveConnection(c, now));
    if (joiners.length === 0) return;
    if (options.catchUp === false) {
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
    // The first frame: read the list now (a stream whose catch-up sent nothing read none).
    if (this.list === null) await this.sync({ catchUp: false });
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

  private async drop(connectionId: string): Promise<void> {
    this.synced.delete(connectionId);
    if (this.list) this.list = this.list.filter((c) => c.connectionId !== connectionId);
    await this.deps.connections.remove(this.sessionId, connectionId);
  }
}
