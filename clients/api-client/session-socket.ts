/**
 * A session's WebSocket (API.md "WebSocket"), reconnecting: when the connection drops (a relay
 * takeover, a network change, a sleeping laptop) it connects again with backoff and resubscribes
 * to the same session; the `init` it gets re-syncs the transcript (./transcript.ts), so repeated
 * `message.create`/`message.finalize` frames are applied once. Browsers authenticate with a
 * single-use ticket (`POST /v1/sessions/{id}/ws-ticket`), fetched again for every connect, so
 * the API token never goes in a URL; other clients may use `token=`.
 *
 * Runs on the standard WebSocket interface: the global one in browsers (and Node 22+), or one
 * given as `WebSocket` (in Node 20, the `ws` package's class).
 */
import type { ClientFrame, ServerFrame, TranscriptMessageView } from "../../functions/contract/frames";
import { Transcript, type TranscriptChange } from "./transcript";

/** The part of the standard WebSocket this client uses. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export type SocketAuth = { token: string } | { ticket: () => Promise<string> };

export interface SessionSocketOptions {
  /** The WebSocket URL (`GET /v1/health` tells it). */
  wsUrl: string;
  sessionId: string;
  auth: SocketAuth;
  /** The WebSocket class; default the global one. */
  WebSocket?: WebSocketConstructor;
  /** Reconnect backoff: first delay and cap (ms); default 500 and 10 000. `false`: never reconnect. */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number } | false;
  /**
   * The stored transcript, oldest first (GET /v1/sessions/{id}/messages, every page). The server
   * sends no frame for a user message: with this, a prompt's user message enters the transcript
   * (./transcript.ts `sync`) when its answer starts and finishes, so a prompt sent over HTTP (a
   * session's first prompt) or queued behind a busy turn shows in its place.
   */
  history?: () => Promise<TranscriptMessageView[]>;
}

export type SocketState = "connecting" | "open" | "reconnecting" | "closed";

export interface SessionSocketEvents {
  /** Every server frame, as received (repeats included). */
  frame: (frame: ServerFrame) => void;
  /** The transcript changed: a message started, streamed, or finished (`finished`: once per message). */
  transcript: (change: TranscriptChange) => void;
  state: (state: SocketState, detail?: string) => void;
}

const OPEN = 1;

export class SessionSocket {
  readonly transcript = new Transcript();
  private socket: WebSocketLike | null = null;
  private listeners: { [K in keyof SessionSocketEvents]: Set<SessionSocketEvents[K]> } = { frame: new Set(), transcript: new Set(), state: new Set() };
  private closedByUser = false;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private pending: ClientFrame[] = [];
  private current: SocketState = "closed";
  private syncing: Promise<void> | null = null;
  private syncAgain = false;
  /** Connections opened so far (1 + reconnects). */
  connects = 0;

  constructor(private readonly options: SessionSocketOptions) {}

  get state(): SocketState {
    return this.current;
  }

  on<K extends keyof SessionSocketEvents>(event: K, listener: SessionSocketEvents[K]): () => void {
    this.listeners[event].add(listener);
    return () => this.listeners[event].delete(listener);
  }

  private emit<K extends keyof SessionSocketEvents>(event: K, ...args: Parameters<SessionSocketEvents[K]>): void {
    for (const l of this.listeners[event]) (l as (...a: Parameters<SessionSocketEvents[K]>) => void)(...args);
  }

  private setState(state: SocketState, detail?: string): void {
    this.current = state;
    this.emit("state", state, detail);
  }

  /** Opens the connection; resolves on the first `open`, rejects if that first attempt fails. */
  connect(): Promise<void> {
    this.closedByUser = false;
    return new Promise((resolve, reject) => {
      void this.open({ resolve, reject });
    });
  }

  private async url(): Promise<string> {
    const params = new URLSearchParams({ sessionId: this.options.sessionId });
    const auth = this.options.auth;
    if ("token" in auth) params.set("token", auth.token);
    else params.set("ticket", await auth.ticket());
    return `${this.options.wsUrl}?${params.toString()}`;
  }

  private async open(first?: { resolve: () => void; reject: (err: Error) => void }): Promise<void> {
    this.setState(this.connects === 0 ? "connecting" : "reconnecting");
    let url: string;
    try {
      url = await this.url();
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      if (first) first.reject(error);
      else this.scheduleReconnect(error.message);
      return;
    }
    if (this.closedByUser) return;
    const Ctor = this.options.WebSocket ?? (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!Ctor) {
      first?.reject(new Error("no WebSocket implementation: pass one as the WebSocket option (in Node 20, the ws package's class)"));
      return;
    }
    const socket = new Ctor(url);
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this.connects += 1;
      this.setState("open");
      for (const frame of this.pending.splice(0)) socket.send(JSON.stringify(frame));
      first?.resolve();
    };
    socket.onmessage = (ev) => {
      let frame: ServerFrame;
      try {
        frame = JSON.parse(typeof ev.data === "string" ? ev.data : String(ev.data)) as ServerFrame;
      } catch {
        return;
      }
      // A good connection: the next drop starts the backoff over.
      if (frame.type === "init") this.attempt = 0;
      this.emit("frame", frame);
      const isNew = frame.type === "message.create" && !this.transcript.get(frame.messageId);
      const change = this.transcript.apply(frame);
      if (change.kind !== "none") this.emit("transcript", change);
      // An answer starts or finishes: its prompt's user message is stored by now.
      if ((isNew && frame.type === "message.create" && frame.role === "assistant") || (change.kind === "message" && change.finished)) this.syncHistory();
      // A stopped session never runs again: nothing to reconnect to.
      if (frame.type === "status" && frame.status === "stopped") this.options.reconnect = false;
    };
    socket.onerror = () => undefined;
    socket.onclose = (ev) => {
      if (this.socket === socket) this.socket = null;
      if (!opened && first) {
        first.reject(new Error(`WebSocket connection to session ${this.options.sessionId} failed (close ${ev.code}${ev.reason ? `: ${ev.reason}` : ""})`));
        this.setState("closed");
        return;
      }
      if (this.closedByUser || this.options.reconnect === false) {
        this.setState("closed", ev.reason || undefined);
        return;
      }
      this.scheduleReconnect(`closed ${ev.code}`);
    };
  }

  private scheduleReconnect(detail: string): void {
    if (this.closedByUser || this.options.reconnect === false) {
      this.setState("closed", detail);
      return;
    }
    const initial = this.options.reconnect?.initialDelayMs ?? 500;
    const max = this.options.reconnect?.maxDelayMs ?? 10_000;
    const base = Math.min(max, initial * 2 ** this.attempt);
    this.attempt += 1;
    // Full jitter over the upper half: many clients dropped by one relay do not reconnect in step.
    const delay = base / 2 + Math.random() * (base / 2);
    this.setState("reconnecting", detail);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.open();
    }, delay);
  }

  /** Merges the stored transcript in (one fetch at a time; a request meanwhile fetches once more after it). */
  private syncHistory(): void {
    const history = this.options.history;
    if (!history) return;
    if (this.syncing) {
      this.syncAgain = true;
      return;
    }
    this.syncing = (async () => {
      do {
        this.syncAgain = false;
        try {
          const change = this.transcript.sync(await history());
          if (change.kind !== "none") this.emit("transcript", change);
        } catch {
          // The next answer's start or finish syncs again.
        }
      } while (this.syncAgain && !this.closedByUser);
      this.syncing = null;
    })();
  }

  /** Sends a client frame; while (re)connecting it is held and sent on the next open. */
  send(frame: ClientFrame): void {
    if (this.socket && this.socket.readyState === OPEN) this.socket.send(JSON.stringify(frame));
    else this.pending.push(frame);
  }

  prompt(content: string): void {
    this.transcript.sent(content);
    this.send({ type: "prompt", content });
  }

  cancel(): void {
    this.send({ type: "cancel" });
  }

  /** Drops the current connection as a network failure would (it reconnects); for tests and "reconnect now". */
  drop(): void {
    this.socket?.close(4000, "dropped by the client");
  }

  /** Closes for good (no reconnect). Closing is not stopping: the session keeps running. */
  close(): void {
    this.closedByUser = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close(1000, "client closed");
    this.setState("closed");
  }
}
