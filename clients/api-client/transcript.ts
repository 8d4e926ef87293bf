/**
 * A session's transcript as a client shows it, assembled from `init` and the turn frames
 * (API.md "WebSocket"). Idempotent: a repeated `message.create` does not restart a message still
 * streaming, a repeated `message.finalize` with the same text (a relay takeover, a reconnect)
 * changes nothing and is reported as no change, deltas after a finalize are ignored (the
 * finalize's text is the full text), and an `init` after a reconnect re-syncs from the stored
 * transcript while keeping a turn still streaming that the store has not caught up with.
 *
 * A finished answer can be reopened (functions/relay/event-translator.ts `cutShort`: OpenCode
 * finished it, or went idle, before its text arrived): the server sends `message.create` again
 * for it, its content so far as deltas, and a second `message.finalize` with the full text. A
 * `message.create` for a finished message opens it again (its content is streamed anew), and a
 * `message.finalize` for a message finished before is a revision (`revised`), never a second
 * finish: `finished` is reported once per message.
 *
 * Prompts: the server sends no frame for a user message (API.md "WebSocket": the turn frames are
 * the assistant's). A prompt is `pending` from its `prompt.queued` (the sender's frame has no
 * `content`: `sent` notes what this client sent) until its user message is delivered: stored
 * once the agent takes it, so it enters the transcript from the stored transcript (`init`, or
 * `sync` with GET /v1/sessions/{id}/messages, ./session-socket.ts `history`) in its place,
 * before its answer, never ahead of the answer to an earlier prompt.
 */
import type { ServerFrame, TranscriptMessageView } from "../../functions/contract/frames";

export interface TextPart {
  kind: "text";
  partId: string;
  text: string;
}

export interface ToolPart {
  kind: "tool";
  partId: string;
  tool: string;
  status: string;
  title?: string;
  input?: Record<string, unknown>;
  output?: string;
  error?: string;
}

export type TurnPart = TextPart | ToolPart;

export interface TurnMessage {
  messageId: string;
  role: string;
  /** The full text so far (deltas joined; the finalize's text once finished). */
  text: string;
  parts: TurnPart[];
  /** Finished: `message.finalize` seen, or stored as completed. */
  done: boolean;
  /** The text of its last finalize, once finished (a reopened message's next finalize with other text is a revision). */
  finishedText?: string;
  reason?: string;
  error?: { code: string; message: string };
  createdAt?: string;
}

/**
 * What applying a frame changed: nothing (a repeat), a re-sync (`init`), or the message it
 * touched. `finished`: its first finalize; `revised`: a later finalize that changed its text
 * (a reopened answer: API.md "WebSocket").
 */
export type TranscriptChange = { kind: "none" } | { kind: "reset" } | { kind: "queue" } | { kind: "message"; message: TurnMessage; finished: boolean; revised?: boolean };

/** A prompt queued (or being processed) whose user message has not entered the transcript yet. */
export interface PendingPrompt {
  promptId: string;
  content: string;
  /** The queue position the server answered (0 or status `processing`: taken at once). */
  position: number;
  status: "queued" | "processing";
}

function fromStored(m: TranscriptMessageView): TurnMessage {
  const parts: TurnPart[] = m.parts.map((p, i) =>
    p.type === "tool"
      ? {
          kind: "tool",
          partId: p.partId ?? `p${i}`,
          tool: p.tool ?? "tool",
          status: p.status ?? "completed",
          ...(p.title !== undefined ? { title: p.title } : {}),
          ...(p.input !== undefined ? { input: p.input } : {}),
          ...(p.output !== undefined ? { output: p.output } : {}),
          ...(p.error !== undefined ? { error: p.error } : {}),
        }
      : { kind: "text", partId: p.partId ?? `p${i}`, text: p.text ?? "" },
  );
  return {
    messageId: m.messageId,
    role: m.role,
    text: m.text,
    parts,
    done: m.completedAt !== null || m.role !== "assistant",
    ...(m.reason !== undefined ? { reason: m.reason } : {}),
    ...(m.error !== undefined ? { error: { code: m.error.code, message: m.error.message } } : {}),
    createdAt: m.createdAt,
  };
}

export class Transcript {
  private readonly byId = new Map<string, TurnMessage>();
  private order: string[] = [];
  private pendingPrompts: PendingPrompt[] = [];
  /** What this client sent that the server has not answered with `prompt.queued` yet (oldest first). */
  private unacknowledged: string[] = [];

  /** Messages oldest first. */
  get messages(): TurnMessage[] {
    return this.order.map((id) => this.byId.get(id)).filter((m): m is TurnMessage => m !== undefined);
  }

  /** Prompts queued whose user message is not in the transcript yet, in queue order. */
  get pending(): PendingPrompt[] {
    return this.pendingPrompts.map((p) => ({ ...p }));
  }

  /** Notes a prompt this client sent: the server's `prompt.queued` to the sender has no `content`. */
  sent(content: string): void {
    this.unacknowledged.push(content);
  }

  /**
   * Re-syncs from the stored transcript (oldest first, complete): stored messages this client
   * did not have enter in their stored place (a prompt's user message, stored once the agent
   * took it), messages it has keep their live state, and those the store has not caught up with
   * stay after them. Reports `reset` when something entered, else `none`.
   */
  sync(stored: TranscriptMessageView[]): TranscriptChange {
    const added: TurnMessage[] = [];
    const order: string[] = [];
    for (const s of stored) {
      if (!this.byId.has(s.messageId)) {
        const m = fromStored(s);
        this.byId.set(m.messageId, m);
        added.push(m);
      }
      order.push(s.messageId);
    }
    if (added.length === 0) return { kind: "none" };
    const inStore = new Set(order);
    this.order = [...order, ...this.order.filter((id) => !inStore.has(id))];
    this.deliver(added);
    return { kind: "reset" };
  }

  /** Pending prompts whose user messages just entered the transcript are pending no more. */
  private deliver(entered: TurnMessage[]): void {
    for (const m of entered) {
      if (m.role !== "user") continue;
      const at = this.pendingPrompts.findIndex((p) => p.content === m.text);
      if (at >= 0) this.pendingPrompts.splice(at, 1);
    }
  }

  get(messageId: string): TurnMessage | undefined {
    return this.byId.get(messageId);
  }

  private ensure(messageId: string, role = "assistant"): TurnMessage {
    let m = this.byId.get(messageId);
    if (!m) {
      m = { messageId, role, text: "", parts: [], done: false };
      this.byId.set(messageId, m);
      this.order.push(messageId);
    }
    return m;
  }

  apply(frame: ServerFrame): TranscriptChange {
    switch (frame.type) {
      case "init": {
        const known = new Set(this.order);
        const streaming = this.messages.filter((m) => !m.done);
        this.byId.clear();
        this.order = [];
        for (const stored of frame.messages) {
          const m = fromStored(stored);
          this.byId.set(m.messageId, m);
          this.order.push(m.messageId);
        }
        // A turn still streaming that the store has not caught up with stays (its finalize will come).
        for (const m of streaming) {
          if (this.byId.has(m.messageId)) continue;
          this.byId.set(m.messageId, m);
          this.order.push(m.messageId);
        }
        this.deliver(this.messages.filter((m) => !known.has(m.messageId)));
        return { kind: "reset" };
      }
      case "prompt.queued": {
        const content = frame.content ?? this.unacknowledged.shift();
        if (content === undefined || this.pendingPrompts.some((p) => p.promptId === frame.promptId)) return { kind: "none" };
        const status = frame.status === "processing" || frame.position === 0 ? "processing" : "queued";
        this.pendingPrompts.push({ promptId: frame.promptId, content, position: frame.position, status });
        return { kind: "queue" };
      }
      case "message.create": {
        const known = this.byId.get(frame.messageId);
        if (known && !known.done) return { kind: "none" };
        if (!known) return { kind: "message", message: this.ensure(frame.messageId, frame.role), finished: false };
        // Reopened (see the file comment): its content so far follows as deltas and tool updates.
        known.done = false;
        known.finishedText ??= known.text;
        known.text = "";
        known.parts = [];
        return { kind: "message", message: known, finished: false };
      }
      case "message.part.text-delta": {
        const m = this.ensure(frame.messageId);
        if (m.done) return { kind: "none" };
        let part = m.parts.find((p): p is TextPart => p.kind === "text" && p.partId === frame.partId);
        if (!part) {
          part = { kind: "text", partId: frame.partId, text: "" };
          m.parts.push(part);
        }
        part.text += frame.delta;
        m.text += frame.delta;
        return { kind: "message", message: m, finished: false };
      }
      case "message.part.tool-update": {
        const m = this.ensure(frame.messageId);
        if (m.done) return { kind: "none" };
        const next: ToolPart = {
          kind: "tool",
          partId: frame.partId,
          tool: frame.tool,
          status: frame.status,
          ...(frame.title !== undefined ? { title: frame.title } : {}),
          ...(frame.input !== undefined ? { input: frame.input } : {}),
          ...(frame.output !== undefined ? { output: frame.output } : {}),
          ...(frame.error !== undefined ? { error: frame.error } : {}),
        };
        const at = m.parts.findIndex((p) => p.kind === "tool" && p.partId === frame.partId);
        if (at >= 0) m.parts[at] = next;
        else m.parts.push(next);
        return { kind: "message", message: m, finished: false };
      }
      case "message.finalize": {
        const m = this.ensure(frame.messageId);
        if (m.done && m.text === frame.text) return { kind: "none" };
        const previous = m.done ? m.text : m.finishedText;
        if (m.text !== frame.text) {
          // The full text wins over what the deltas built (a reconnect may have missed some; a reopened message's earlier finalize).
          m.parts = [...m.parts.filter((p) => p.kind === "tool"), ...(frame.text === "" ? [] : [{ kind: "text" as const, partId: `${m.messageId}:final`, text: frame.text }])];
        }
        m.done = true;
        m.finishedText = frame.text;
        m.text = frame.text;
        m.reason = frame.reason;
        if (frame.error) m.error = { code: frame.error.code, message: frame.error.message };
        return previous !== undefined ? { kind: "message", message: m, finished: false, revised: previous !== frame.text } : { kind: "message", message: m, finished: true };
      }
      default:
        return { kind: "none" };
    }
  }
}
