/**
 * The streaming relay (ARCHITECTURE.md §1, issue 5): holds one OpenCode SSE stream per running
 * session, fans the translated messages out to the session's WebSocket clients in order, and
 * acts on the agent's busy/idle boundary (seed 002 constraint 9): busy is recorded; idle touches
 * activity, records `lastKnownAgentIdleAt` (constraint 10), persists the turn and completes it
 * (`completeTurn`), which sends the next queued prompt.
 *
 * Ownership (issue 15, ARCHITECTURE.md §9 "Relay at scale"; ports/relay.ts): liveness belongs to
 * the process. One heartbeat item per relay (owner, epoch, expiry), renewed by one write every
 * ttl/3; each held session names the relay, epoch and sandbox, written once at claim. A held
 * stream costs no DynamoDB request at rest: nothing is renewed or re-read per session. A session
 * is revalidated (one strongly consistent read) only when something happened to it: a nudge (a
 * flow committed, the prompt path found it unwatched), its stream failed and is about to
 * reconnect (seed 002 constraint 12), or a write naming its sandbox was refused. Revalidation
 * drops it (not running, or claimed or seized by someone else), reopens it on a new runtime, or
 * keeps it. Claims come from nudges (at once), from takeovers (a peer whose heartbeat died or
 * retired: its sessions are read at once, and only those) and from scans (at start, and the
 * backstop). A relay whose own heartbeat expired stops acting on
 * every stream and registers a new epoch; a draining relay retires its heartbeat, so its sessions
 * are claimable at once. Takeover loses no finalized message and duplicates none.
 *
 * Takeover of a turn in progress: the prompt stays `processing`; a busy agent is watched to its
 * idle boundary; an idle agent whose stored messages already answer the prompt finished while no
 * relay watched, so the turn is completed then. A prompt is never sent again by the relay.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Config } from "../config/config";
import type { SandboxKeyring } from "../config/sandbox-keyring";
import { agentEndpoint } from "../agent/agent-endpoint";
import { armIdleCheck } from "../idle/idle-check";
import type { LifecycleScheduler } from "../ports/lifecycle-scheduler";
import { LeaseLostError } from "../domain/errors";
import type { SessionRecord } from "../domain/session";
import { completeTurn, deliverQueuedPrompts } from "../services/prompt-delivery";
import { errorForLog } from "../observability/logger";
import type { AgentClient, AgentEndpoint, AgentEvent } from "../ports/agent-client";
import type { ClientPush } from "../ports/client-push";
import type { FlowRunner } from "../ports/flow-runner";
import { METRIC_NAMES, type MetricsSink } from "../ports/metrics-sink";
import type { ClaimView, NudgeSource, RelayClaim, RelayHandover, RelayHeartbeat, RelayLeaseStore, RelaySiblings, RetiredRelay } from "../ports/relay";
import type { ConnectionRegistry, PromptQueue, QueuedPrompt } from "../ports/session-items";
import type { SessionStore } from "../ports/session-store";
import type { TranscriptMessage, TranscriptStore } from "../ports/transcript";
import { OpenCodeMessageReader, type AgentMessage, type AgentMessageSource } from "./agent-messages";
import { EventTranslator, type RelayClientMessage, type Translation } from "./event-translator";
import { onPendingPermissions, onPermissionsAsked, onPermissionsReplied, onRetry, resendInterrupted, settleFailedTurn, withAuthors, type TurnWatch } from "./agent-turns";
import { answerEmptyTurnAgain, retryPendingAnswer } from "./empty-turns";
import { ClaimPacer, type ClaimPacerOptions, type ClaimPriority } from "./claim-pacer";
import { SessionFanOut } from "./fan-out";
import { SessionStream, type StreamSnapshot } from "./session-stream";
import { StreamLossReporter } from "./stream-loss";

export interface RelayDeps {
  sessions: SessionStore;
  prompts: PromptQueue;
  flows: FlowRunner;
  agent: AgentClient;
  /** Sandbox keys: the agent's password in each sandbox is derived from its session's key. */
  sandboxKeys: SandboxKeyring;
  /** The agent's stored messages (catch-up); OpenCode over HTTP when not given. */
  agentMessages?: AgentMessageSource;
  connections: ConnectionRegistry;
  push: ClientPush;
  transcript: TranscriptStore;
  relayLeases: RelayLeaseStore;
  /** AWS: the nudge queue (adapters/aws/sqs-relay-nudge.ts), long-polled in a loop. Locally nudges are direct calls to `look`. */
  nudges?: NudgeSource;
  /** A drain's handover to the peers (AWS: the nudge queue; locally: the successor in process). None: they notice at their next heartbeat round. */
  handover?: RelayHandover;
  /** Idle checks armed when the agent goes (or is found) idle, with the grace from `config`. */
  scheduler: LifecycleScheduler;
  /** Told after each completed turn (automation runs end from their prompt's turn). */
  turnSettled?: (sessionId: string) => Promise<void>;
  config: Config;
  logger: Logger;
  now: () => Date;
  /** RelayTakeovers (issue 19); none: not published. */
  metrics?: MetricsSink;
  /** The other relays of this process (worker threads); none: this relay is alone in it. */
  siblings?: RelaySiblings;
}

export interface RelayOptions {
  /** This relay's identity in its heartbeat, claims and audit actors (`relay:<ownerId>`). */
  ownerId: string;
  /** Default 30: the heartbeat's TTL, so how long a dead relay's sessions wait for a successor. */
  leaseTtlSeconds?: number;
  /** Default 60 000: the backstop scan period for running sessions nobody watches (one page each, `backstopNow`). */
  scanIntervalMs?: number;
  /** Default 1,000: running sessions the backstop reads per period. */
  backstopPageSize?: number;
  /** Default ttl/3: one heartbeat write (and one read of the peers' heartbeats) per period. */
  renewIntervalMs?: number;
  /** Default 250: the pause between two receives of `deps.nudges` (when given; a receive itself long-polls). */
  nudgePollMs?: number;
  /** Reconnect delays; default [1 s, 2 s, 5 s, 10 s]. */
  backoffMs?: readonly number[];
  /** Default 45 000 (session-stream.ts). */
  heartbeatTimeoutMs?: number;
  /** Most sessions this relay holds at once, so several relays share the load. Default 10 000 (bench section 5). */
  maxSessions?: number;
  /**
   * Backstop: a session's connection list is read again before an event at most this often when
   * no join nudge came (fan-out.ts). Default 30 000; 0 reads it before every event.
   */
  connectionCacheMs?: number;
  /**
   * Default 30 000. A prompt `processing` this long while the agent sits idle and never answered
   * it was never sent (its deliverer died between claiming and sending): it goes back to the
   * queue. Checked when the session is revalidated (a nudge: the prompt path nudges when it
   * finds a stale processing prompt), at most once per `strandedCheckMs` (default 60 000).
   */
  strandedPromptMs?: number;
  strandedCheckMs?: number;
  /** At most one sandbox liveness check per session this often when its stream fails (stream-loss.ts). */
  streamLossReportIntervalMs?: number;
  /** How claims are paced against the fan-out (claim-pacer.ts); defaults there. */
  claimPacing?: ClaimPacerOptions;
}

/** What a watch streams from: changes to any of these mean another runtime (reopen). */
interface Target {
  sandboxId: string;
  openCodeUrl: string;
  agentSessionId: string;
}

interface Watch {
  sessionId: string;
  claim: RelayClaim;
  target: Target;
  /** The target's OpenCode with its authorization (never logged). */
  endpoint: AgentEndpoint;
  translator: EventTranslator;
  stream: SessionStream;
  /** Control operations (revalidate, reopen, drop) run one at a time per session. */
  control: Promise<void>;
  /**
   * The turn's busy write (agent state), off the delivery path: a turn's first deltas do not wait
   * for it. The idle boundary and a reconnect's state write wait for it first, so the table sees
   * busy before idle, as the agent did.
   */
  writes: Promise<void>;
  /** A finalized message could not be recorded from the stream: catch up at the next idle boundary. */
  gaps: boolean;
  /** The session's clients: a joiner is caught up with the turn in progress before its first frame (fan-out.ts). */
  fanOut: SessionFanOut;
  /** When the current turn's busy state was first seen: only prompts sent before it belong to it. */
  busySince: Date | null;
  /** Last stranded-prompt check (epoch ms). */
  strandedCheckedAt: number;
  /** Permissions put to clients and a failover in progress (./agent-turns.ts). */
  turn: TurnWatch;
  /** The stored transcript was read into the translator (the first catch-up with a history). */
  storedKnown: boolean;
  /** Settles once the first (re)connect's catch-up ran, a connect failed, or the watch ended. */
  live: Promise<void>;
  settleLive: () => void;
}

export interface RelayCounters {
  claims: number;
  releases: number;
  leasesLost: number;
  reopens: number;
  clientMessages: number;
  turnsCompleted: number;
  handlerErrors: number;
  /** Scans for claimable sessions finished (tests wait on these rather than on time). */
  scans: number;
  /** Backstop pages read (`backstopNow`, one per scan period). */
  backstopPages: number;
  /** Heartbeat rounds finished. */
  heartbeats: number;
  /** Nudges handled (`look`). */
  nudges: number;
  /** Session revalidations (one read each): the relay's only per-session reads. */
  revalidations: number;
}

function targetOf(session: Pick<SessionRecord, "status" | "sandboxId" | "openCodeUrl" | "codingAgentSessionId"> | ClaimView | null): Target | null {
  if (!session || session.status !== "running") return null;
  if (!session.sandboxId || !session.openCodeUrl || !session.codingAgentSessionId) return null;
  return { sandboxId: session.sandboxId, openCodeUrl: session.openCodeUrl, agentSessionId: session.codingAgentSessionId };
}

function sameTarget(a: Target, b: Target): boolean {
  return a.sandboxId === b.sandboxId && a.openCodeUrl === b.openCodeUrl && a.agentSessionId === b.agentSessionId;
}

function userText(message: AgentMessage): string {
  return message.parts
    .filter((p) => p.type === "text" && !p.synthetic && !p.ignored)
    .map((p) => p.text ?? "")
    .join("");
}

/**
 * True when the agent's newest user message is `prompt` and a completed answer follows it: the
 * turn ran to its end. Matched by content, since the agent knows nothing of prompt ids (so a
 * prompt repeating the previous one word for word while still on its way looks answered).
 */
export function isAnswered(prompt: Pick<QueuedPrompt, "content">, messages: AgentMessage[]): boolean {
  const asked = messages.findLastIndex((m) => m.info.role === "user");
  const question = messages[asked];
  if (!question || userText(question) !== prompt.content) return false;
  return messages.slice(asked + 1).some((m) => m.info.role === "assistant" && m.info.time.completed !== undefined);
}

/** Items read per scan page (a Query page also stops at 1 MB). */
const SCAN_PAGE = 1000;
/**
 * Claim writes in flight at once during a scan. What a claim costs after its write (its stream's
 * connect and first catch-up) is bounded by the pacer (claim-pacer.ts), so a takeover of
 * thousands of sessions leaves the loop to the streams already held (bench 5c).
 */
const CLAIM_CONCURRENCY = 4;

/** A copy of `items` in random order (Fisher-Yates). */
function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
/** Transcript items read per page at a first catch-up (a Query page also stops at 1 MB). */
const TRANSCRIPT_PAGE = 1000;

export class StreamingRelay {
  private readonly watches = new Map<string, Watch>();
  private readonly ttlSeconds: number;
  private readonly agentMessages: AgentMessageSource;
  private readonly actor: string;
  private readonly streamLoss: StreamLossReporter;
  /** Claims from their write to their stream's first catch-up, paced on the event loop's utilization. */
  readonly pacer: ClaimPacer;
  private heartbeat: RelayHeartbeat | null = null;
  private registering: Promise<RelayHeartbeat | null> | null = null;
  /** Peers live at the last heartbeat round (owner -> epoch). */
  private live = new Map<string, number>();
  /** Peers a handover nudge said retired (`owner#epoch`): left out of `live` until a read no longer lists them. */
  private readonly retiredPeers = new Set<string>();
  /** Peers a handover nudge named since the last heartbeat round: that round reads their sessions, for any of its nudges lost. */
  private readonly handedOverBy = new Set<string>();
  /** Peers that died or retired whose sessions are still to be read (`takeOverNow`), once the scan running now ends. */
  private readonly takeoverPending = new Set<string>();
  /** Claims in progress by session, so a nudge and a scan never claim one session twice. */
  private readonly claiming = new Map<string, Promise<void>>();
  private scanTimer: ReturnType<typeof setInterval> | null = null;
  /** Where the next backstop page starts (null: the start of the running sessions). */
  private backstopCursor: string | null = null;
  /** Aborts a nudge receive (a long poll) in flight when the relay shuts down. */
  private readonly stopReceiving = new AbortController();
  private renewTimer: ReturnType<typeof setInterval> | null = null;
  private nudgeTimer: ReturnType<typeof setInterval> | null = null;
  private scanning: Promise<void> | null = null;
  private rescan = false;
  private renewing: Promise<void> | null = null;
  private polling: Promise<void> | null = null;
  private draining = false;
  readonly counters: RelayCounters = {
    claims: 0,
    releases: 0,
    leasesLost: 0,
    reopens: 0,
    clientMessages: 0,
    turnsCompleted: 0,
    handlerErrors: 0,
    scans: 0,
    backstopPages: 0,
    heartbeats: 0,
    nudges: 0,
    revalidations: 0,
  };

  constructor(
    private readonly deps: RelayDeps,
    private readonly options: RelayOptions,
  ) {
    this.ttlSeconds = options.leaseTtlSeconds ?? 30;
    this.agentMessages = deps.agentMessages ?? new OpenCodeMessageReader();
    this.actor = `relay:${options.ownerId}`;
    this.streamLoss = new StreamLossReporter(deps, { actor: this.actor, minIntervalMs: options.streamLossReportIntervalMs });
    this.pacer = new ClaimPacer(options.claimPacing);
  }

  get ownerId(): string {
    return this.options.ownerId;
  }

  /** This process's heartbeat epoch (null before the first registration). */
  get epoch(): number | null {
    return this.heartbeat?.epoch ?? null;
  }

  /** Sessions whose stream this relay holds now. */
  heldSessions(): string[] {
    return [...this.watches.keys()];
  }

  /** Per-stream counters summed over the held sessions (bench, metrics). */
  streamCounters(): { open: number; connects: number; disconnects: number; heartbeatTimeouts: number; events: number } {
    const sum = { open: 0, connects: 0, disconnects: 0, heartbeatTimeouts: 0, events: 0 };
    for (const w of this.watches.values()) {
      if (w.stream.state === "open") sum.open++;
      sum.connects += w.stream.counters.connects;
      sum.disconnects += w.stream.counters.disconnects;
      sum.heartbeatTimeouts += w.stream.counters.heartbeatTimeouts;
      sum.events += w.stream.counters.events;
    }
    return sum;
  }

  /** Registers, scans at once, then every `scanIntervalMs`; one heartbeat every ttl/3; reads nudges when it has a source. */
  start(): void {
    if (this.scanTimer || this.draining) return;
    const renewMs = this.options.renewIntervalMs ?? Math.max(1, Math.floor((this.ttlSeconds * 1000) / 3));
    this.scanTimer = setInterval(() => void this.backstopNow(), this.options.scanIntervalMs ?? 60_000);
    this.renewTimer = setInterval(() => void this.renewNow(), renewMs);
    if (this.deps.nudges) this.nudgeTimer = setInterval(() => void this.pollNudges(), this.options.nudgePollMs ?? 250);
    void this.scanNow();
  }

  /**
   * SIGTERM: stop scanning, close every stream and retire the heartbeat (one write), so every
   * session naming this relay is claimable at once; then hand them over (`deps.handover`: one
   * nudge per session naming the retired heartbeat), so a peer claims each at once. Without a
   * handover (or for a nudge lost) a peer takes them over at its next heartbeat round.
   */
  drain(): Promise<void> {
    return this.shutdown({ release: true });
  }

  /**
   * A crash, for tests and the local runtime's relay restart: stop everything but leave the
   * heartbeat and the claims, so a successor takes the sessions over only when it expires.
   */
  kill(): Promise<void> {
    return this.shutdown({ release: false });
  }

  private async shutdown(options: { release: boolean }): Promise<void> {
    this.draining = true;
    // A long poll in flight ends now, not after up to 20 s.
    this.stopReceiving.abort();
    for (const timer of [this.scanTimer, this.renewTimer, this.nudgeTimer]) if (timer) clearInterval(timer);
    this.scanTimer = null;
    this.renewTimer = null;
    this.nudgeTimer = null;
    await this.scanning;
    await this.renewing;
    await this.polling;
    await Promise.all(this.claiming.values());
    // A reopen in progress may replace a watch while this runs: repeat until none is left.
    const held = new Set<string>();
    while (this.watches.size > 0) {
      for (const id of this.watches.keys()) held.add(id);
      await Promise.all([...this.watches.values()].map((w) => this.inControl(w, () => this.drop(w, { release: false }))));
    }
    const heartbeat = this.heartbeat ?? (await this.registering?.catch(() => null)) ?? null;
    this.heartbeat = null;
    if (!options.release || !heartbeat) return;
    await this.deps.relayLeases.retire(heartbeat);
    this.counters.releases++;
    if (!this.deps.handover || held.size === 0) return;
    try {
      await this.deps.handover.handover({ owner: heartbeat.owner, epoch: heartbeat.epoch }, [...held]);
    } catch (err) {
      this.deps.logger.warn("relay handover incomplete: peers take over at their next heartbeat round", { held: held.size, error: errorForLog(err) });
    }
  }

  stop(): Promise<void> {
    return this.drain();
  }

  /** The heartbeat (registering a new epoch when there is none); null while draining or unreachable. */
  private async ensureHeartbeat(): Promise<RelayHeartbeat | null> {
    if (this.heartbeat && this.deps.now().getTime() < this.heartbeat.expiresAt) return this.heartbeat;
    if (this.draining) return null;
    // Ran out before a renewal: the old epoch's sessions may be another relay's by now.
    if (this.heartbeat && this.watches.size > 0) await this.loseAll();
    this.registering ??= this.deps.relayLeases
      .register(this.options.ownerId, this.deps.now(), this.ttlSeconds)
      .then((hb) => {
        if (this.draining) return null;
        this.heartbeat = hb;
        this.deps.logger.info("relay heartbeat registered", { owner: hb.owner, epoch: hb.epoch });
        return hb;
      })
      .finally(() => {
        this.registering = null;
      });
    return this.registering;
  }

  /** One scan: claim running sessions nobody live watches, up to `maxSessions`. A scan asked for while one runs runs again after it. */
  scanNow(): Promise<void> {
    if (this.scanning) {
      this.rescan = true;
      return this.scanning;
    }
    // A full scan reads the live relays first: it covers a takeover asked for before it.
    this.takeoverPending.clear();
    this.scanning = this.scan().then(() => undefined).finally(() => {
      this.scanning = null;
      this.nextScan();
    });
    return this.scanning;
  }

  /**
   * A takeover: claim what the relays `owners` held (they died or retired), reading only their
   * sessions (the byRelay index), not every running one. Runs after the scan running now, if any.
   */
  takeOverNow(owners: Iterable<string> = []): Promise<void> {
    for (const owner of owners) if (owner !== this.options.ownerId) this.takeoverPending.add(owner);
    if (this.scanning) return this.scanning;
    const from = [...this.takeoverPending];
    this.takeoverPending.clear();
    this.scanning = (async () => {
      for (const owner of from) await this.scan(null, Number.POSITIVE_INFINITY, SCAN_PAGE, true, owner);
    })().finally(() => {
      this.scanning = null;
      this.nextScan();
    });
    return this.scanning;
  }

  /** What was asked for while a scan ran: a full scan, else the takeovers waiting. */
  private nextScan(): void {
    if (this.draining) return;
    if (this.rescan) {
      this.rescan = false;
      void this.scanNow();
    } else if (this.takeoverPending.size > 0) void this.takeOverNow();
  }

  /**
   * The periodic backstop (issue 15): one page of the running sessions per period, the next
   * period going on from where this one stopped, so a full pass over N running sessions takes
   * N / `backstopPageSize` (1,000) periods and a period reads one page, not the whole partition. (Nudges
   * are durable SQS messages now; the backstop only covers one that could not be handled.) A full
   * scan (`scanNow`: at start, after this relay's own heartbeat was lost) still reads everything
   * at once; a peer's death reads only that peer's sessions (`takeOverNow`). Skipped while a full scan runs.
   */
  backstopNow(): Promise<void> {
    if (this.scanning) return this.scanning;
    this.scanning = this.scan(this.backstopCursor, 1, this.options.backstopPageSize ?? SCAN_PAGE, false)
      .then((next) => {
        this.backstopCursor = next;
      })
      .finally(() => {
        this.scanning = null;
        this.counters.backstopPages++;
        // A full scan or a takeover asked for meanwhile runs now.
        this.nextScan();
      });
    return this.scanning;
  }

  /** One heartbeat round: renew the heartbeat (one write) and read the peers' (one Query); a peer gone means a takeover of its sessions now. */
  renewNow(): Promise<void> {
    this.renewing ??= this.beat().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  /** The heartbeat round by its name in issue 15. */
  heartbeatNow(): Promise<void> {
    return this.renewNow();
  }

  /**
   * A nudge: the session changed (a flow committed; the prompt path found it unwatched or a prompt
   * stale). Held here: revalidate it; otherwise claim it if it runs and nobody live watches it.
   * Resolves once the claim is written (or refused; a claim waits for a pacer permit first), before its stream connects.
   */
  async look(sessionId: string, options: { untilLiveMs?: number; retired?: RetiredRelay } = {}): Promise<void> {
    await this.lookOnce(sessionId, options.retired);
    const watch = this.watches.get(sessionId);
    if (!watch || !options.untilLiveMs) return;
    // In process (the local runtime's nudge): also wait, within a bound, for the stream's first
    // catch-up, so a prompt right after the flow finishes finds the relay settled, not racing it.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([watch.live, new Promise<void>((resolve) => (timer = setTimeout(resolve, options.untilLiveMs)))]);
    clearTimeout(timer);
  }

  private async lookOnce(sessionId: string, retired?: RetiredRelay): Promise<void> {
    if (this.draining) return;
    // A handover: the peer retired its heartbeat, which the last round still showed live.
    if (retired) this.forgetPeer(retired);
    this.counters.nudges++;
    const watch = this.watches.get(sessionId);
    if (watch) {
      // A client may have joined (send-init nudges once a connection is ready): catch it up now.
      void watch.fanOut.joined().catch((err: unknown) => this.deps.logger.warn("relay fan-out catch-up failed", { sessionId, error: errorForLog(err) }));
      await this.inControl(watch, () => this.revalidate(watch, { strandedCheck: true }));
      return;
    }
    if (this.full()) return;
    const claimed = () => this.claimPaced(sessionId, "nudge").catch((err: unknown) => this.deps.logger.warn("relay claim failed", { sessionId, error: errorForLog(err) }));
    await claimed();
    // A scan's claim of this session may have been in flight with the peers as read before the
    // handover (so refused): once more, now that the retired peer is out of `live`.
    if (retired && !this.watches.has(sessionId) && !this.draining) await claimed();
  }

  private forgetPeer(peer: RetiredRelay): void {
    this.retiredPeers.add(`${peer.owner}#${peer.epoch}`);
    this.handedOverBy.add(peer.owner);
    if (this.live.get(peer.owner) === peer.epoch) this.live.delete(peer.owner);
  }

  /** The live heartbeats (one Query), less the peers a handover said retired; those leave the set once the read no longer lists them. */
  private async readLive(): Promise<Map<string, number>> {
    const live = await this.deps.relayLeases.liveRelays(this.deps.now());
    for (const key of this.retiredPeers) {
      const cut = key.lastIndexOf("#");
      const owner = key.slice(0, cut);
      if (live.get(owner) === Number(key.slice(cut + 1))) live.delete(owner);
      else this.retiredPeers.delete(key);
    }
    return live;
  }

  /**
   * One receive from `deps.nudges` (AWS), each nudge handled by `look`. A nudge is done once this
   * relay holds the session (revalidated or claimed just now); otherwise another live relay may
   * hold it, or held it until the flow's seize (a pause): it is left for the others until it was
   * received as often as there are live relays, then done. A nudge whose handling failed is left
   * too (delivered again).
   */
  async pollNudges(): Promise<void> {
    const source = this.deps.nudges;
    if (!source || this.polling || this.draining) return;
    this.polling = (async () => {
      try {
        const received = await source.receive(this.stopReceiving.signal);
        await Promise.all(
          received.map(async (nudge) => {
            try {
              if (this.draining) {
                await nudge.leave();
                return;
              }
              await this.look(nudge.sessionId, nudge.retired ? { retired: nudge.retired } : {});
              const mine = this.watches.has(nudge.sessionId);
              if (mine || nudge.receiveCount >= Math.max(1, this.live.size)) await nudge.done();
              else await nudge.leave();
            } catch (err) {
              this.deps.logger.warn("relay nudge not handled", { sessionId: nudge.sessionId, error: errorForLog(err) });
            }
          }),
        );
      } catch (err) {
        // Aborted by a shutdown: nothing was received.
        if (!this.draining) this.deps.logger.warn("relay nudge receive failed", { error: errorForLog(err) });
      }
    })().finally(() => {
      this.polling = null;
    });
    await this.polling;
  }

  private async beat(): Promise<void> {
    try {
      const current = this.heartbeat;
      if (!current) {
        await this.ensureHeartbeat();
        return;
      }
      try {
        this.heartbeat = await this.deps.relayLeases.beat(current, this.deps.now(), this.ttlSeconds);
      } catch (err) {
        if (!(err instanceof LeaseLostError)) throw err;
        // Expired before this renewal (a stall, the store unreachable): another relay may hold
        // these sessions by now. Stop acting on all of them, then start again as a new epoch.
        this.deps.logger.warn("relay heartbeat lost: dropping every session", { owner: current.owner, epoch: current.epoch, held: this.watches.size });
        await this.loseAll();
        await this.ensureHeartbeat();
        void this.scanNow();
        return;
      }
      const before = this.live;
      this.live = await this.readLive();
      // A peer that died or retired (or restarted: a new epoch) since the last round: its sessions wait for a claim now.
      const gone = new Set([...before].filter(([owner, epoch]) => owner !== this.options.ownerId && this.live.get(owner) !== epoch).map(([owner]) => owner));
      for (const owner of this.handedOverBy) gone.add(owner);
      this.handedOverBy.clear();
      if (gone.size > 0) void this.takeOverNow(gone);
    } catch (err) {
      // Not renewed; if it runs out before the next attempt, `guarded` stops acting on the streams.
      this.deps.logger.warn("relay heartbeat failed", { error: errorForLog(err) });
    } finally {
      this.counters.heartbeats++;
    }
  }

  /** Every watch dropped without a release: this relay's heartbeat ran out. */
  private async loseAll(): Promise<void> {
    this.heartbeat = null;
    const lost = [...this.watches.values()];
    this.counters.leasesLost += lost.length;
    await Promise.all(lost.map((w) => this.inControl(w, () => this.drop(w, { release: false }))));
  }

  /**
   * Scans the running sessions (those naming relay `heldBy` when given) from `from` (a listing
   * cursor; null: the start) for at most `maxPages` pages; returns where it stopped (null: it
   * reached the end).
   */
  private async scan(from: string | null = null, maxPages = Number.POSITIVE_INFINITY, pageSize = SCAN_PAGE, hints = true, heldBy?: string): Promise<string | null> {
    let cursor: string | null = from;
    let pages = 0;
    try {
      if (!(await this.ensureHeartbeat())) return null;
      const live = await this.readLive();
      this.live = live;
      do {
        // A full relay's backstop still reads its page: a watch of its own listed there is stale.
        if (this.draining || (this.full() && hints)) return null;
        if (pages >= maxPages) return cursor;
        pages++;
        const listing = { limit: pageSize, cursor, live };
        const page = heldBy === undefined ? await this.deps.relayLeases.listClaimable(this.deps.now(), listing) : await this.deps.relayLeases.listHeldBy(heldBy, this.deps.now(), listing);
        // Listed as free while this relay still watches it: the watch is stale (a flow seized the
        // session or moved it to another sandbox, and the nudge that would have said so was lost).
        // Revalidate it: that drops it or reopens it on the session's current sandbox.
        const stale = page.sessions.flatMap(({ sessionId }) => {
          const watch = this.watches.get(sessionId);
          return watch ? [watch] : [];
        });
        await Promise.all(stale.map((watch) => this.inControl(watch, () => this.revalidate(watch, { strandedCheck: false }))));
        // Relays scanning together (the workers of one process at start, every relay when a peer
        // dies) would walk the page in the same order and race for each session, the losers paying
        // a refused write and a read for it: what a sibling holds is skipped, this relay's share
        // comes first, and each part is in random order (for the relays of other processes).
        // Not in the backstop: it is the net for what a hint may hide (a sibling at its cap never
        // scans, so never notices its watch went stale; a worker that died before telling).
        const siblings = hints ? this.deps.siblings : undefined;
        const free = page.sessions.filter((v) => !this.watches.has(v.sessionId) && !siblings?.heldElsewhere(v.sessionId));
        const pending = siblings
          ? [...shuffled(free.filter((v) => siblings.mine(v.sessionId))), ...shuffled(free.filter((v) => !siblings.mine(v.sessionId)))]
          : shuffled(free);
        const worker = async () => {
          for (let listed = pending.shift(); listed !== undefined; listed = pending.shift()) {
            if (this.draining || this.full()) return;
            // A sibling may have claimed it since the page was listed.
            if (siblings?.heldElsewhere(listed.sessionId)) continue;
            const seen = listed;
            await this.claimPaced(seen.sessionId, "scan", live, siblings, seen).catch((err: unknown) => this.deps.logger.warn("relay claim failed", { sessionId: seen.sessionId, error: errorForLog(err) }));
          }
        };
        await Promise.all(Array.from({ length: Math.min(CLAIM_CONCURRENCY, pending.length) }, worker));
        cursor = page.nextCursor;
      } while (cursor);
      return null;
    } catch (err) {
      this.deps.logger.warn("relay scan failed", { error: errorForLog(err), ...(heldBy === undefined ? {} : { takeoverOf: heldBy }) });
      // A takeover's read failed (throttled; a local table on disk from before the byRelay index):
      // a full scan after it covers the dead relay's sessions.
      if (heldBy !== undefined) this.rescan = true;
      return null;
    } finally {
      this.counters.scans++;
    }
  }

  /**
   * A claim under a pacer permit, held until the stream's first catch-up ran (or its connect
   * failed, or the pacer's bound passed): resolves once the claim is written (or refused).
   */
  private async claimPaced(sessionId: string, priority: ClaimPriority, live?: Map<string, number>, siblings?: RelaySiblings, listed?: ClaimView): Promise<void> {
    if (this.watches.has(sessionId)) return;
    const release = await this.pacer.acquire(priority);
    let holding = false;
    try {
      // The wait for a permit is when a sibling's claim of a scanned session is heard: skip it unread.
      if (siblings?.heldElsewhere(sessionId)) return;
      await this.claimOnce(sessionId, live, listed);
      const watch = this.watches.get(sessionId);
      if (watch) {
        holding = true;
        let timer: ReturnType<typeof setTimeout> | undefined;
        void Promise.race([watch.live, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.pacer.holdMs)))]).then(() => {
          clearTimeout(timer);
          release();
        });
      }
    } finally {
      if (!holding) release();
    }
  }

  /** One claim per session at a time (a nudge and a scan may ask together). */
  private claimOnce(sessionId: string, live?: Map<string, number>, listed?: ClaimView): Promise<void> {
    const running = this.claiming.get(sessionId);
    if (running) return running;
    const p = this.claim(sessionId, live, listed).finally(() => this.claiming.delete(sessionId));
    this.claiming.set(sessionId, p);
    return p;
  }

  /**
   * Claims the session from `listed` (a scan's page: no read first) or from a strongly consistent
   * read. A listing is eventually consistent: a claim from it that its condition refused is tried
   * once more from a read (someone claimed it since, or the listing was behind).
   */
  private async claim(sessionId: string, live?: Map<string, number>, listed?: ClaimView): Promise<void> {
    if (this.watches.has(sessionId) || this.full()) return;
    const heartbeat = await this.ensureHeartbeat();
    if (!heartbeat) return;
    const attempt = async (view: ClaimView | null) => (view && targetOf(view) ? this.deps.relayLeases.claim(view, heartbeat, this.deps.now(), live ?? this.live) : null);
    let seen = listed ?? null;
    let claim = await attempt(seen);
    if (!claim) {
      seen = await this.deps.relayLeases.view(sessionId);
      claim = await attempt(seen);
    }
    // The session may have left `running` already, or another relay holds it.
    if (!claim || !seen) return;
    // The runtime the claim's write held (its condition: running on the claimed sandbox).
    const target = targetOf(claim.session);
    if (!target) {
      await this.release(claim);
      return;
    }
    this.counters.claims++;
    // Held by another relay before (its heartbeat expired, or it retired): a takeover. A flow's seize is not a relay's hold.
    if (seen.relayOwner !== null && !seen.relayOwner.startsWith("flow:") && seen.relayOwner !== claim.owner) this.deps.metrics?.put(METRIC_NAMES.relayTakeovers, 1, "Count");
    if (this.draining || this.watches.has(sessionId)) {
      await this.release(claim);
      return;
    }
    let endpoint: AgentEndpoint;
    try {
      endpoint = await agentEndpoint(this.deps.sandboxKeys, sessionId, target.openCodeUrl);
    } catch (err) {
      // No key to reach its agent with (the key secret unreadable): a later scan, or another relay, tries again.
      await this.release(claim);
      throw err;
    }
    // Claims run several at once: the cap is checked again once nothing is awaited before the watch exists.
    if (this.draining || this.watches.has(sessionId) || this.full()) {
      await this.release(claim);
      return;
    }
    this.open(sessionId, claim, target, endpoint);
    this.deps.logger.info("relay holds session", { sessionId, owner: claim.owner, epoch: claim.epoch, fence: claim.fence, sandboxId: target.sandboxId });
  }

  /** Holds `maxSessions` already: no further claim. */
  private full(): boolean {
    return this.watches.size >= (this.options.maxSessions ?? 10_000);
  }

  private async release(claim: RelayClaim): Promise<void> {
    await this.deps.relayLeases.releaseClaim(claim);
    this.counters.releases++;
  }

  private open(sessionId: string, claim: RelayClaim, target: Target, endpoint: AgentEndpoint): void {
    // The handlers run only after `start()`, by which time `watch` exists.
    const stream = new SessionStream({
      agent: this.deps.agent,
      messages: this.agentMessages,
      endpoint,
      agentSessionId: target.agentSessionId,
      backoffMs: this.options.backoffMs,
      heartbeatTimeoutMs: this.options.heartbeatTimeoutMs,
      handler: {
        onConnected: (snapshot) => {
          this.streamLoss.streamConnected(sessionId);
          return this.guarded(watch, () => watch.fanOut.exclusive(() => this.connected(watch, snapshot)));
        },
        onEvent: (event) => this.guarded(watch, () => watch.fanOut.exclusive(() => this.event(watch, event))),
        onDisconnected: ({ reason, error, retryInMs }) => {
          // A first connect that failed is as far as a claim's pacer permit waits (claim-pacer.ts).
          watch.settleLive();
          this.deps.logger.info("relay stream lost: reconnecting", { sessionId, reason, retryInMs, ...(error ? { error: errorForLog(error) } : {}) });
          this.deps.metrics?.put(METRIC_NAMES.relayStreamsLost, 1, "Count", { Reason: reason });
          // Issue 25 §5: the sandbox may be dead; a flow with provider bindings finds out (stream-loss.ts).
          if (this.watches.get(sessionId) === watch) void this.streamLoss.streamFailed(sessionId, reason);
        },
        // Seed 002 constraint 12: revalidate after the backoff, before reconnecting, from a
        // strongly consistent read: a session an idle snapshot seized, claimed by another relay,
        // or no longer running drops this watch instead of reconnecting it; a new runtime reopens.
        beforeReconnect: async () => {
          await this.inControl(watch, () => this.revalidate(watch, { strandedCheck: false }));
          return this.watches.get(sessionId) === watch;
        },
      },
    });
    const translator = new EventTranslator({ sessionId, agentSessionId: target.agentSessionId });
    const fanOut = new SessionFanOut(this.deps, sessionId, { cacheMs: this.options.connectionCacheMs, openFrames: () => translator.openFrames() });
    const watch: Watch = {
      sessionId,
      claim,
      target,
      endpoint,
      translator,
      stream,
      control: Promise.resolve(),
      writes: Promise.resolve(),
      gaps: false,
      storedKnown: false,
      fanOut,
      busySince: null,
      strandedCheckedAt: this.deps.now().getTime(),
      turn: { sessionId, endpoint, agentSessionId: target.agentSessionId, asked: new Set(), failover: null, resentAfterAbort: null, answeredAgain: null, pendingAnswer: null },
      live: Promise.resolve(),
      settleLive: () => undefined,
    };
    watch.live = new Promise<void>((resolve) => {
      watch.settleLive = resolve;
    });
    this.watches.set(sessionId, watch);
    this.deps.siblings?.holds(sessionId);
    stream.start();
    // Its clients are read beside the connect, so no frame of a turn waits for that Query (fan-out.ts).
    fanOut.prefetch().catch((err: unknown) => this.deps.logger.warn("relay: connection list not read at claim", { sessionId, error: errorForLog(err) }));
  }

  /** Serializes control operations per session; failures are logged, never thrown to timers. */
  private inControl(watch: Watch, fn: () => Promise<void>): Promise<void> {
    watch.control = watch.control.then(fn).catch((err: unknown) => {
      this.deps.logger.warn("relay control failed", { sessionId: watch.sessionId, error: errorForLog(err) });
    });
    return watch.control;
  }

  /** Handler work only while this watch is current and this relay's heartbeat cannot have expired. */
  private async guarded(watch: Watch, fn: () => Promise<void>): Promise<void> {
    if (this.watches.get(watch.sessionId) !== watch) return;
    const heartbeat = this.heartbeat;
    if (!heartbeat || heartbeat.epoch !== watch.claim.epoch || this.deps.now().getTime() >= heartbeat.expiresAt) {
      // Not renewed in time (store unreachable?): a successor may hold the session already.
      this.counters.leasesLost++;
      void this.inControl(watch, () => this.drop(watch, { release: false }));
      return;
    }
    try {
      await fn();
    } catch (err) {
      this.counters.handlerErrors++;
      // The stream reconnects; its snapshot re-derives the agent state and catches up.
      throw err;
    }
  }

  private async connected(watch: Watch, snapshot: StreamSnapshot): Promise<void> {
    try {
      // A reconnect: joiners of the gap are caught up first. The first connect has sent nothing to
      // anyone: the claim's read of the list (fan-out.ts `prefetch`) is awaited at the first frame.
      if (watch.fanOut.listed) await watch.fanOut.sync();
      await this.caughtUp(watch, snapshot);
    } finally {
      watch.settleLive();
    }
  }

  private async caughtUp(watch: Watch, snapshot: StreamSnapshot): Promise<void> {
    // The first catch-up of a session with a history: what the transcript already has is not
    // written again (a claim rewrote it all, a PutItem per message; now a Query per 1 MB read).
    if (!watch.storedKnown && snapshot.messages.length > 0) watch.translator.knowStored(await this.storedTranscript(watch.sessionId));
    watch.storedKnown = true;
    const translation = watch.translator.reconnected(snapshot);
    // Busy on (re)connect: the turn began before this relay saw it.
    if (snapshot.busy) watch.busySince ??= this.deps.now();
    await this.perform(watch, translation);
    // Issue 25 §3: a question asked before this relay held the session (takeover) or while the stream was down.
    if (snapshot.busy) await onPendingPermissions(this.deps, watch.turn, (m) => this.fanOut(watch, m));
    if (translation.transition === null) {
      // First sight of this runtime (or no change): describe the agent as it is now (after a busy write still on its way).
      await watch.writes;
      const session = await this.recordAgentState(watch, snapshot.busy);
      // An idle agent on (re)connect may be an idle session: check when its grace runs out (armed from the item just written).
      if (!snapshot.busy && session) await armIdleCheck(this.deps, watch.sessionId, "relay found the agent idle", session);
    }
    if (!snapshot.busy && translation.transition !== "idle") await this.settleUnobservedTurn(watch, snapshot.messages);
  }

  private async event(watch: Watch, event: AgentEvent): Promise<void> {
    // Server events (the stream's heartbeats) reach no client: a held stream at rest reads nothing.
    if (!event.type.startsWith("server.")) await watch.fanOut.sync();
    await this.perform(watch, watch.translator.apply(event));
    // An empty answer OpenCode would not replace yet (its loop was still ending): now, maybe (empty-turns.ts).
    if (watch.turn.pendingAnswer && !watch.translator.busy && (await retryPendingAnswer(this.deps, watch.turn)) === "gave_up") {
      await completeTurn(this.deps, watch.sessionId, { actor: this.actor });
    }
  }

  /**
   * The agent is idle and no idle boundary was seen here: a processing prompt whose answer is
   * stored finished while no relay watched (complete it); one without an answer is still on
   * its way to the agent (wait for its turn). With nothing processing, queued prompts may have
   * been stranded by a relay that died before delivering: deliver them.
   */
  private async settleUnobservedTurn(watch: Watch, messages: AgentMessage[]): Promise<void> {
    // One read of the session's open prompts for both questions (a claim's catch-up comes here).
    const prompts = await this.deps.prompts.listOpen(watch.sessionId);
    const processing = prompts.filter((p) => p.status === "processing");
    if (processing.length > 0 && !processing.every((p) => isAnswered(p, messages))) {
      this.deps.logger.info("relay: prompt in flight, waiting for its turn", { sessionId: watch.sessionId, promptId: processing[0]?.promptId });
      return;
    }
    if (processing.length > 0) {
      await completeTurn(this.deps, watch.sessionId, { actor: this.actor });
      this.counters.turnsCompleted++;
    } else {
      await deliverQueuedPrompts(this.deps, watch.sessionId, { actor: this.actor, wakeFromError: false, queued: prompts.filter((p) => p.status === "queued") });
    }
  }

  /**
   * A prompt claimed for delivery whose sender died before `prompt_async` would wait forever:
   * no turn starts, so no idle boundary completes it. With the agent idle and the prompt
   * unanswered past the grace, it goes back to the queue and is delivered again; one the agent
   * did answer (its idle boundary was missed) is completed. Never both.
   */
  private async recoverStrandedPrompts(watch: Watch): Promise<void> {
    const now = this.deps.now().getTime();
    if (watch.translator.busy || now - watch.strandedCheckedAt < (this.options.strandedCheckMs ?? 60_000)) return;
    watch.strandedCheckedAt = now;
    const grace = this.options.strandedPromptMs ?? 30_000;
    const stale = (await this.deps.prompts.list(watch.sessionId, "processing")).filter((p) => now - Date.parse(p.updatedAt) > grace);
    if (stale.length === 0) return;
    if (await this.deps.agent.isBusy(watch.endpoint, watch.target.agentSessionId)) return;
    const messages = await this.agentMessages.listMessages(watch.endpoint, watch.target.agentSessionId);
    for (const prompt of stale) {
      const answered = isAnswered(prompt, messages);
      await this.deps.prompts.move(prompt, "processing", answered ? "completed" : "queued", this.deps.now());
      this.deps.logger.warn(answered ? "relay: completed a prompt whose turn ended unseen" : "relay: requeued a prompt that never reached the agent", {
        sessionId: watch.sessionId,
        promptId: prompt.promptId,
      });
    }
    await deliverQueuedPrompts(this.deps, watch.sessionId, { actor: this.actor, wakeFromError: false });
  }

  private async storedTranscript(sessionId: string): Promise<TranscriptMessage[]> {
    const records: TranscriptMessage[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: TranscriptMessage[]; nextCursor: string | null } = await this.deps.transcript.list(sessionId, { limit: TRANSCRIPT_PAGE, cursor });
      records.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    return records;
  }

  /** Persist, then fan out (a client's `init` either has the message or the client is ready for its finalize), then the transition. */
  private async perform(watch: Watch, t: Translation): Promise<void> {
    if (t.gaps) watch.gaps = true;
    for (const record of await withAuthors(this.deps, watch.sessionId, t.finalized)) await this.deps.transcript.upsert(record);
    const send = (message: RelayClientMessage | ({ type: string } & Record<string, unknown>)) => this.fanOut(watch, message);
    for (const message of t.client) await send(message);
    await onPermissionsAsked(this.deps, watch.turn, t.permissionsAsked, send);
    await onPermissionsReplied(watch.turn, t.permissionsReplied, send);
    if (t.retry) {
      const failing = await onRetry(this.deps, watch.turn, t.retry, watch.translator.model);
      if (failing) await this.perform(watch, watch.translator.failTurn(failing));
    }
    if (t.transition === "busy") {
      // A turn started: an empty answer still waiting to be asked for again is that turn's to decide.
      watch.turn.pendingAnswer = null;
      watch.busySince = this.deps.now();
      const at = this.deps.now();
      watch.writes = watch.writes
        .then(async () => void (await this.recordAgentState(watch, true, at)))
        .catch((err: unknown) => {
          // Best effort, as the describing field it is: the idle boundary writes the state again.
          this.deps.logger.warn("relay: busy state not recorded", { sessionId: watch.sessionId, error: errorForLog(err) });
        });
    }
    if (t.transition === "idle") await this.idle(watch, t.outcome);
  }

  private async fanOut(watch: Watch, message: { type: string } & Record<string, unknown>): Promise<void> {
    await watch.fanOut.send(message);
    this.counters.clientMessages++;
  }

  /** The idle boundary (seed 002 constraints 9, 10). */
  private async idle(watch: Watch, outcome: Translation["outcome"] = null): Promise<void> {
    const now = this.deps.now();
    // The turn's busy write first (the table's order stays the agent's).
    await watch.writes;
    // Activity and the agent's state in one write, which returns the session the idle check is armed from.
    const session = await this.deps.sessions.recordAgentIdle(watch.sessionId, watch.target.sandboxId, now);
    // The session references another sandbox now: revalidate it (a flow's nudge may still be on its way).
    if (!session) void this.inControl(watch, () => this.revalidate(watch, { strandedCheck: false }));
    if (watch.gaps) {
      watch.gaps = false;
      const messages = await this.agentMessages.listMessages(watch.endpoint, watch.target.agentSessionId);
      await this.perform(watch, watch.translator.reconnected({ busy: false, messages }));
    }
    // Only the prompt this turn answered: one sent after the turn began (a race between a
    // deliverer and this boundary) waits for its own turn.
    const startedBefore = watch.busySince ?? new Date(0);
    watch.busySince = null;
    // A turn that ended in an error fails its prompt, or sends it again on the next model (the
    // turn goes on: no completion, no idle check).
    let failure = null;
    if (outcome && (await resendInterrupted(this.deps, watch.turn, outcome))) return;
    // An empty answer to the prompt just sent (OpenCode's early idle): asked again, the turn goes on (empty-turns.ts).
    if (outcome && (await answerEmptyTurnAgain(this.deps, watch.turn, outcome, this.agentMessages))) return;
    if (outcome && outcome.reason !== "end_turn") {
      failure = await settleFailedTurn(this.deps, watch.turn, outcome, (m) => this.fanOut(watch, m));
      if (failure === null) return;
    } else watch.turn.failover = null;
    await completeTurn(this.deps, watch.sessionId, { actor: this.actor, startedBefore, failure });
    this.counters.turnsCompleted++;
    // The agent going idle is when a session may become idle (seed 002 §3d).
    await armIdleCheck(this.deps, watch.sessionId, "agent went idle", session ?? undefined);
  }

  /** The session as written, or null: not written (another sandbox now, or gone). */
  private async recordAgentState(watch: Watch, busy: boolean, at: Date = this.deps.now()): Promise<SessionRecord | null> {
    const written = await this.deps.sessions.recordAgentState(watch.sessionId, watch.target.sandboxId, { busy, at });
    // The session references another sandbox now: revalidate it (a flow's nudge may still be on its way).
    if (!written) void this.inControl(watch, () => this.revalidate(watch, { strandedCheck: false }));
    return written;
  }

  /**
   * One strongly consistent read of the session, on an event (a nudge, a reconnect, a refused
   * write): drop it when it is not this watch's any more (seized, claimed by another relay) or
   * no longer runs; reopen it on a new runtime (re-claimed for the new sandbox); else keep it.
   */
  private async revalidate(watch: Watch, options: { strandedCheck: boolean }): Promise<void> {
    if (this.watches.get(watch.sessionId) !== watch) return;
    this.counters.revalidations++;
    const seen = await this.deps.relayLeases.view(watch.sessionId);
    const claim = watch.claim;
    const ours = seen !== null && seen.relayOwner === claim.owner && seen.relayEpoch === claim.epoch && seen.relayFence === claim.fence;
    if (!ours) {
      this.counters.leasesLost++;
      this.deps.logger.warn("relay claim lost: dropping session", { sessionId: watch.sessionId, holder: seen?.relayOwner ?? null });
      await this.drop(watch, { release: false });
      return;
    }
    const target = targetOf(seen);
    if (!target) {
      this.deps.logger.info("relay lets go: session not running", { sessionId: watch.sessionId, status: seen.status });
      await this.drop(watch, { release: true });
      return;
    }
    if (sameTarget(target, watch.target)) {
      if (options.strandedCheck) await this.recoverStrandedPrompts(watch);
      return;
    }
    // Resume or migration: another sandbox (or agent session); its agent state starts unknown.
    // The endpoint first: if it cannot be built, the old stream goes on until the next revalidation.
    const endpoint = await agentEndpoint(this.deps.sandboxKeys, watch.sessionId, target.openCodeUrl);
    const heartbeat = this.heartbeat;
    // A new sandbox needs a claim of its own (written on condition nothing changed since `seen`).
    const next = target.sandboxId === claim.sandboxId ? claim : heartbeat ? await this.deps.relayLeases.claim(seen, heartbeat, this.deps.now(), this.live) : null;
    this.watches.delete(watch.sessionId);
    await watch.stream.close();
    if (!next || this.draining) this.deps.siblings?.dropped(watch.sessionId);
    if (!next) {
      this.counters.leasesLost++;
      return;
    }
    this.counters.reopens++;
    this.deps.logger.info("relay reopens session on its new runtime", { sessionId: watch.sessionId, from: watch.target.sandboxId, to: target.sandboxId });
    if (this.draining) await this.release(next);
    else this.open(watch.sessionId, next, target, endpoint);
  }

  private async drop(watch: Watch, options: { release: boolean }): Promise<void> {
    watch.settleLive();
    if (this.watches.get(watch.sessionId) === watch) {
      this.watches.delete(watch.sessionId);
      this.deps.siblings?.dropped(watch.sessionId);
    }
    await watch.stream.close();
    if (options.release) await this.release(watch.claim);
  }
}
