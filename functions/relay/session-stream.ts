/**
 * One SSE connection to a sandbox's OpenCode `/event` stream for one session (the seed's
 * SseClient plus SessionHub's reconnect): a heartbeat timeout, reconnect with backoff
 * [1 s, 2 s, 5 s, 10 s, 10 s...], and a generation number so that nothing scheduled for an
 * older connection acts after `close()` (seed 002 constraint 12).
 *
 * On every (re)connect, once the stream is live (its first event arrived), the handler gets the
 * agent's busy state and stored messages before any further event: read after subscribing, so
 * a turn that ends in between is seen either in the snapshot or as an event, never in neither.
 * The handler's work is awaited before the next event is read, so its effects stay in order.
 */
import type { AgentClient, AgentEndpoint, AgentEvent } from "../ports/agent-client";
import type { AgentMessage, AgentMessageSource } from "./agent-messages";

/** Seed 000 SessionHub reconnect delays; the last one repeats. */
export const DEFAULT_BACKOFF_MS: readonly number[] = [1_000, 2_000, 5_000, 10_000];
/**
 * OpenCode sends `server.heartbeat` every 10 s on `/event` (its server: a 10-second schedule
 * mapped to `server.heartbeat`; two in test/fixtures/opencode/sse-echo-turn.txt, 10.0 s apart by
 * their event ids). 20 s of silence is at least one missed heartbeat with a whole interval of
 * slack: a dead stream. Seed 000 wants a dead sandbox noticed within 30 s: a silent stream is
 * declared dead at 20 s and reported for the loss check at once (relay/stream-loss.ts), which
 * leaves the check ~10 s.
 */
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 20_000;

export interface StreamSnapshot {
  busy: boolean;
  messages: AgentMessage[];
}

export type DisconnectReason = "ended" | "heartbeat" | "error";

export interface SessionStreamHandler {
  /** After each (re)connect, before the events that follow it. A throw drops the connection. */
  onConnected(snapshot: StreamSnapshot): Promise<void>;
  /** Every event, in stream order (the first one included). A throw drops the connection. */
  onEvent(event: AgentEvent): Promise<void>;
  /** The connection was lost; a reconnect is scheduled in `retryInMs`. */
  onDisconnected?(info: { reason: DisconnectReason; error?: unknown; retryInMs: number }): void;
  /**
   * Runs when the reconnect delay is over, before reconnecting (seed 002 constraint 12: revalidate
   * after the wait, before any side effect). False: do not reconnect (the owner closes the stream).
   * A throw reconnects, as without the check.
   */
  beforeReconnect?(): Promise<boolean>;
}

export interface SessionStreamOptions {
  agent: Pick<AgentClient, "events" | "isBusy">;
  messages: AgentMessageSource;
  /** The sandbox's OpenCode and its authorization. */
  endpoint: AgentEndpoint;
  agentSessionId: string;
  handler: SessionStreamHandler;
  backoffMs?: readonly number[];
  heartbeatTimeoutMs?: number;
}

export type StreamState = "new" | "connecting" | "open" | "waiting" | "closed";

export class SessionStream {
  private generation = 0;
  private failures = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private controller: AbortController | null = null;
  private running: Promise<void> = Promise.resolve();
  private current: StreamState = "new";
  private readonly backoffMs: readonly number[];
  private readonly heartbeatTimeoutMs: number;
  readonly counters = { connects: 0, disconnects: 0, heartbeatTimeouts: 0, events: 0 };

  constructor(private readonly options: SessionStreamOptions) {
    this.backoffMs = options.backoffMs && options.backoffMs.length > 0 ? options.backoffMs : DEFAULT_BACKOFF_MS;
    this.heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
  }

  get state(): StreamState {
    return this.current;
  }

  start(): void {
    if (this.current !== "new") return;
    this.connect(++this.generation);
  }

  /** Ends the connection and cancels a pending reconnect; resolves once the handler is no longer running. */
  async close(): Promise<void> {
    this.generation++;
    this.current = "closed";
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    this.controller?.abort();
    await this.running;
  }

  private connect(generation: number): void {
    this.current = "connecting";
    this.running = this.runOnce(generation).then((outcome) => {
      if (generation === this.generation) this.scheduleReconnect(generation, outcome);
    });
  }

  private scheduleReconnect(generation: number, outcome: { reason: DisconnectReason; error?: unknown }): void {
    const retryInMs = this.backoffMs[Math.min(this.failures, this.backoffMs.length - 1)] ?? 0;
    this.failures++;
    this.current = "waiting";
    this.counters.disconnects++;
    if (outcome.reason === "heartbeat") this.counters.heartbeatTimeouts++;
    this.options.handler.onDisconnected?.({ ...outcome, retryInMs });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      // seed 002 constraint 12: a reconnect scheduled for an older generation (closed since) does nothing.
      if (generation !== this.generation) return;
      const check = this.options.handler.beforeReconnect?.() ?? Promise.resolve(true);
      void check
        .catch(() => true)
        .then((proceed) => {
          // Closed while the check ran, or told not to: no reconnect.
          if (proceed && generation === this.generation) this.connect(generation);
        });
    }, retryInMs);
  }

  /** One connection, until it ends, fails, goes silent, or the generation moves on. */
  private async runOnce(generation: number): Promise<{ reason: DisconnectReason; error?: unknown }> {
    const { agent, endpoint, agentSessionId, handler } = this.options;
    const controller = new AbortController();
    this.controller = controller;
    let silent = false;
    // Measures only the wait for the next event, not the handler's own work: one timer per
    // connection, refreshed (no new timer per event: bench 5, GC at 10,000 streams), and while an
    // event is being handled its expiry only re-arms it.
    let handling = false;
    const heartbeat = setTimeout(() => {
      if (handling) {
        heartbeat.refresh();
        return;
      }
      silent = true;
      controller.abort();
    }, this.heartbeatTimeoutMs);
    let live = false;
    try {
      for await (const event of agent.events(endpoint, controller.signal)) {
        handling = true;
        if (generation !== this.generation) break;
        if (!live) {
          // Busy first, then the messages: read in parallel, a turn ending between the two reads
          // looked idle next to a message still open, which was then finalized with partial text.
          // In this order an idle answer means every message read after it is complete.
          const busy = await agent.isBusy(endpoint, agentSessionId);
          const messages = await this.options.messages.listMessages(endpoint, agentSessionId);
          if (generation !== this.generation) break;
          await handler.onConnected({ busy, messages });
          live = true;
          this.failures = 0;
          this.current = "open";
          this.counters.connects++;
        }
        if (generation !== this.generation) break;
        this.counters.events++;
        await handler.onEvent(event);
        handling = false;
        heartbeat.refresh();
      }
      return { reason: silent ? "heartbeat" : "ended" };
    } catch (error) {
      return silent ? { reason: "heartbeat" } : { reason: "error", error };
    } finally {
      clearTimeout(heartbeat);
      controller.abort();
    }
  }
}
