/**
 * Translates one coding-agent session's OpenCode events into API.md WebSocket messages
 * (`message.create`, `message.part.text-delta`, `message.part.tool-update`, `message.finalize`)
 * and transcript records, and derives the agent's busy state. Pure: no I/O, no clock; the relay
 * (relay.ts) performs what a `Translation` asks for.
 *
 * Busy/idle (seed 002 constraint 9): the agent is busy while its last `session.status` said
 * busy/retry (or the API said so on connect), or while an assistant message is open. The idle
 * boundary is the busy -> idle change of that derived state after an event, whichever event
 * caused it, never a match on an event name such as `session.idle`. An explicit idle status
 * finalizes any message still open, so a turn always ends with a finalize.
 *
 * Errors (issue 25 §2, functions/relay/agent-errors.ts): a `session.error` or an assistant
 * message's `error` becomes an `error` frame (`code: "agent_error"`, never for a cancel), and
 * the messages it ended are finalized with `reason` `error` (or `canceled`) and the error; the
 * turn's outcome goes with the idle transition, so the relay can fail (or fail over) its prompt.
 * Tool updates carry the call's input and, once it ended, its output or error (bounded,
 * redacted). `permission.asked` / `permission.replied` are handed to the relay, which applies
 * the session's permission policy.
 */
import { createHash } from "node:crypto";
import * as z from "zod";
import type { AgentEvent } from "../ports/agent-client";
import type { TranscriptMessage, TranscriptPart } from "../ports/transcript";
import type { AgentMessage } from "./agent-messages";
import { OpenCodePermissionRequest, permissionAskOf, type PermissionAsk } from "./permission-asks";
import { classifyAgentError, classifyRetry, clipToolText, clipToolValue, finishReasonOf, type AgentError, type FinishReason } from "./agent-errors";

export const TOOL_STATUSES = ["pending", "running", "completed", "error"] as const;
export type ToolStatus = (typeof TOOL_STATUSES)[number];

/** Server -> client messages for one assistant turn (API.md WebSocket). */
export type RelayClientMessage =
  | { type: "message.create"; messageId: string; role: "assistant" }
  | { type: "message.part.text-delta"; messageId: string; partId: string; delta: string }
  | {
      type: "message.part.tool-update";
      messageId: string;
      partId: string;
      tool: string;
      status: ToolStatus;
      title?: string;
      /** The call's arguments (bounded, redacted), once the agent has them. */
      input?: Record<string, unknown>;
      /** What a completed call returned (bounded, redacted). */
      output?: string;
      /** Why a call in `error` failed. */
      error?: string;
    }
  | { type: "message.finalize"; messageId: string; text: string; reason: FinishReason; error?: AgentError }
  /** The agent failed (never sent for a cancel): the model provider's or OpenCode's error, redacted. */
  | { type: "error"; code: "agent_error"; message: string; error: AgentError; messageId?: string };

export type { PermissionAsk } from "./permission-asks";

/** How a turn ended, with the idle transition that ended it. */
export interface TurnOutcome {
  reason: FinishReason;
  error: AgentError | null;
  /** `provider/model` of the turn's last assistant message, when seen. */
  model: string | null;
  /** The turn's assistant messages said nothing and called no tool. */
  empty: boolean;
}

export type AgentTransition = "busy" | "idle" | null;

export interface Translation {
  /** To broadcast, in this order. */
  client: RelayClientMessage[];
  /** Transcript records that are final (or changed) now: user messages and finalized assistant messages. */
  finalized: TranscriptMessage[];
  /** A change of the derived busy state caused by this step. */
  transition: AgentTransition;
  /** True when a finalized message could not be recorded (its creation time was never seen): catch up from the agent. */
  gaps: boolean;
  /** Set with an `idle` transition. */
  outcome: TurnOutcome | null;
  /** OpenCode is waiting out a provider error before retrying (`session.status` `retry`). */
  retry: AgentError | null;
  permissionsAsked: PermissionAsk[];
  permissionsReplied: { permissionId: string; response: string }[];
}

const SessionStatusProps = z.object({ status: z.object({ type: z.string(), message: z.string().optional() }) });
const MessageInfo = z.object({
  id: z.string(),
  role: z.string(),
  time: z.object({ created: z.number(), completed: z.number().optional() }),
  error: z.unknown().optional(),
  providerID: z.string().optional(),
  modelID: z.string().optional(),
});
const SessionErrorProps = z.object({ error: z.unknown().optional() });
const PermissionRepliedProps = z.object({ requestID: z.string(), reply: z.string() });
const ToolStateSchema = z
  .object({
    status: z.string().optional(),
    title: z.string().optional(),
    input: z.record(z.string(), z.unknown()).optional(),
    output: z.string().optional(),
    error: z.string().optional(),
  })
  .optional();
type ToolState = z.infer<typeof ToolStateSchema>;
const MessageUpdatedProps = z.object({ info: MessageInfo });
const PartUpdatedProps = z.object({
  part: z.object({
    id: z.string(),
    messageID: z.string(),
    type: z.string(),
    text: z.string().optional(),
    synthetic: z.boolean().optional(),
    ignored: z.boolean().optional(),
    tool: z.string().optional(),
    state: ToolStateSchema,
  }),
});
const PartDeltaProps = z.object({ messageID: z.string(), partID: z.string(), field: z.string(), delta: z.string() });
const ToolStatusSchema = z.enum(TOOL_STATUSES);

interface PartState {
  partId: string;
  type: string;
  text: string;
  /** Synthetic or ignored text parts are the agent's own additions, not part of what was said. */
  hidden: boolean;
  tool: string | null;
  status: ToolStatus | null;
  title: string | null;
  input: Record<string, unknown> | null;
  output: string | null;
  toolError: string | null;
}

interface MessageState {
  id: string;
  role: "user" | "assistant" | null;
  createdAt: number | null;
  completedAt: number | null;
  /** In order of first sight. */
  parts: Map<string, PartState>;
  /** `message.create` was sent. */
  announced: boolean;
  /** The error that ended it (assistant messages). */
  error: AgentError | null;
  model: string | null;
}

interface Out {
  client: RelayClientMessage[];
  finalized: TranscriptMessage[];
  gaps: boolean;
  retry: AgentError | null;
  permissionsAsked: PermissionAsk[];
  permissionsReplied: { permissionId: string; response: string }[];
}

function emptyOut(): Out {
  return { client: [], finalized: [], gaps: false, retry: null, permissionsAsked: [], permissionsReplied: [] };
}

/** A message's last record, as `EventTranslator.record` remembers it. */
interface RecordedMessage {
  /** SHA-256 of the record's JSON: equal means unchanged. */
  digest: string;
  createdAt: string;
}

/**
 * A record's identity for "unchanged": SHA-256 of its JSON with keys sorted at every level (a
 * record read back from the table has its maps in another order), without `authorId` (the relay
 * adds it after translation).
 */
export function recordDigest(record: TranscriptMessage): string {
  const { authorId: _author, ...content } = record;
  return createHash("sha256").update(canonicalJson(content)).digest("base64");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** How many finalized message ids are remembered to ignore late updates. */
const DONE_MEMORY = 1000;
/** How many messages cut short by an idle boundary may still be reopened. */
const CUT_SHORT_MEMORY = 20;

export class EventTranslator {
  /** The last status the agent reported; null until the first `session.status` or connect. */
  private statusBusy: boolean | null = null;
  private readonly messages = new Map<string, MessageState>();
  /** Assistant messages already finalized: late updates for them are ignored. */
  private readonly done = new Set<string>();
  /**
   * What the last record produced per message was, so an unchanged one is not persisted again: a
   * digest of it, not the record (a held stream kept every message's text and tool output here,
   * 375.6 KiB for a 100-turn session in bench 5e), and a user message's first creation time.
   */
  private readonly recorded = new Map<string, RecordedMessage>();
  /** The error of the turn in progress (a `session.error`, or the first failed message); reset at its idle boundary. */
  private turnError: AgentError | null = null;
  private turnErrorReported = false;
  /**
   * The provider error OpenCode is retrying (`session.status` `retry`), until the turn makes
   * progress again: a turn that ends meanwhile (aborted during the wait: OpenCode 1.18.33 then
   * completes the message with no error) ended with it.
   */
  private retryError: AgentError | null = null;
  /** The turn in progress produced assistant text or a tool call. */
  private turnOutput = false;
  /** The model of the turn's last assistant message. */
  private turnModel: string | null = null;
  /**
   * Assistant messages an idle boundary finalized before they completed (OpenCode 1.18.33 can
   * report idle a moment before its loop ends): new text for one reopens it, so its answer still
   * reaches clients (`message.create` again with the text so far, then its deltas and a second
   * `message.finalize` with the full text, both idempotent by id) and the transcript. The turn
   * stays over: a reopened message makes no busy/idle transition (its prompt was completed at the
   * idle boundary, and a prompt sent since is not its).
   */
  private readonly cutShort = new Map<string, MessageState>();
  private readonly reopened = new Set<string>();

  constructor(private readonly ids: { sessionId: string; agentSessionId: string }) {}

  /**
   * The transcript as stored (a claim or a first connect, before `reconnected`): what is already
   * there, unchanged, is not persisted again (a claim rewrote the whole history: a PutItem per
   * message). A user message keeps the creation time stored first.
   */
  knowStored(records: TranscriptMessage[]): void {
    for (const r of records) this.remember(r.messageId, { digest: recordDigest(r), createdAt: r.createdAt });
  }

  /** The newest DONE_MEMORY records are remembered. */
  private remember(messageId: string, recorded: RecordedMessage): void {
    this.recorded.delete(messageId);
    this.recorded.set(messageId, recorded);
    if (this.recorded.size > DONE_MEMORY) {
      const oldest = this.recorded.keys().next();
      if (!oldest.done) this.recorded.delete(oldest.value);
    }
  }

  /** The derived agent state (see the file comment). */
  get busy(): boolean {
    // A message reopened after its turn ended (`cutShort`) streams, but starts no turn.
    return this.statusBusy === true || this.openMessages().some((id) => !this.reopened.has(id));
  }

  /** Assistant messages announced to clients and not finalized yet. */
  openMessages(): string[] {
    return [...this.messages.values()].filter((m) => m.role === "assistant" && m.announced && !this.done.has(m.id)).map((m) => m.id);
  }

  /**
   * What a client that joins now has not seen of the turn in progress (issue 25, relay/fan-out.ts):
   * each open message as `message.create` and its content so far, as `announce` sends them.
   * Changes nothing.
   */
  openFrames(): RelayClientMessage[] {
    const out = emptyOut();
    for (const id of this.openMessages()) {
      const m = this.messages.get(id);
      if (!m) continue;
      out.client.push({ type: "message.create", messageId: m.id, role: "assistant" });
      for (const part of m.parts.values()) {
        if (part.type === "text" && !part.hidden && part.text !== "") out.client.push({ type: "message.part.text-delta", messageId: m.id, partId: part.partId, delta: part.text });
        if (part.type === "tool" && part.status !== null) out.client.push(toolUpdate(m.id, part));
      }
    }
    return out.client;
  }

  /** One SSE event. Events of other agent sessions (and server-level ones) change nothing. */
  apply(event: AgentEvent): Translation {
    return this.step((out) => {
      if (!this.isOurs(event)) return;
      switch (event.type) {
        case "session.status": {
          const parsed = SessionStatusProps.safeParse(event.properties);
          if (parsed.success) this.setStatus(parsed.data.status.type, out, parsed.data.status.message);
          return;
        }
        case "message.updated": {
          const parsed = MessageUpdatedProps.safeParse(event.properties);
          if (parsed.success) this.messageUpdated(parsed.data.info, out);
          return;
        }
        case "message.part.updated": {
          const parsed = PartUpdatedProps.safeParse(event.properties);
          if (parsed.success) this.partUpdated(parsed.data.part, out);
          return;
        }
        case "message.part.delta": {
          const parsed = PartDeltaProps.safeParse(event.properties);
          if (parsed.success && parsed.data.field === "text") this.textDelta(parsed.data.messageID, parsed.data.partID, parsed.data.delta, out);
          return;
        }
        case "session.error": {
          const parsed = SessionErrorProps.safeParse(event.properties);
          const error = parsed.success ? classifyAgentError(parsed.data.error) : null;
          this.noteError(error ?? { code: "agent_error", message: "the agent reported an error" }, null, out);
          return;
        }
        case "permission.asked": {
          const parsed = OpenCodePermissionRequest.safeParse(event.properties);
          if (parsed.success) out.permissionsAsked.push(permissionAskOf(parsed.data));
          return;
        }
        case "permission.replied": {
          const parsed = PermissionRepliedProps.safeParse(event.properties);
          if (parsed.success) out.permissionsReplied.push({ permissionId: parsed.data.requestID, response: parsed.data.reply });
          return;
        }
        default:
          return;
      }
    });
  }

  /**
   * A (re)connect: the agent's busy state and stored messages, read after the new stream was
   * live. Completed messages become transcript records (the catch-up); a message this translator
   * had open is finalized with the stored text; the newest turn's unseen assistant messages are
   * announced, so clients that stayed connected through a relay gap still see its answer.
   */
  reconnected(snapshot: { busy: boolean; messages: AgentMessage[] }): Translation {
    return this.step((out) => {
      const lastUser = snapshot.messages.findLastIndex((m) => m.info.role === "user");
      snapshot.messages.forEach((m, i) => this.resync(m, i > lastUser, out));
      this.setStatus(snapshot.busy ? "busy" : "idle", out);
    });
  }

  /**
   * The relay ends the turn on purpose (a rate-limited turn it aborts to fail over): the turn
   * ends with this error rather than as a cancel, and clients hear it now.
   */
  failTurn(error: AgentError): Translation {
    return this.step((out) => this.noteError(error, null, out));
  }

  /** `provider/model` of the newest assistant message seen in the turn in progress. */
  get model(): string | null {
    return this.turnModel;
  }

  private step(fn: (out: Out) => void): Translation {
    const before = this.busy;
    const out = emptyOut();
    fn(out);
    const after = this.busy;
    let outcome: TurnOutcome | null = null;
    if (before && !after) {
      this.prune();
      const error = this.turnError ?? this.retryError;
      outcome = { reason: finishReasonOf(error), error, model: this.turnModel, empty: !this.turnOutput };
      this.turnOutput = false;
      this.turnError = null;
      this.retryError = null;
      this.turnErrorReported = false;
      this.turnModel = null;
    }
    return { ...out, transition: before === after ? null : after ? "busy" : "idle", outcome };
  }

  /**
   * The turn failed: clients hear it once (an `error` frame; a cancel is no failure), and the
   * messages it ends are finalized with it.
   */
  private noteError(error: AgentError, messageId: string | null, out: Out): void {
    // The first error of a turn is its cause; an abort that follows a failure changes nothing.
    if (this.turnError === null || (this.turnError.code === "canceled" && error.code !== "canceled")) this.turnError = error;
    if (error.code === "canceled" || this.turnErrorReported) return;
    this.turnErrorReported = true;
    out.client.push({ type: "error", code: "agent_error", message: error.message, error, ...(messageId ? { messageId } : {}) });
  }

  private isOurs(event: AgentEvent): boolean {
    const p = event.properties;
    const nested = (key: "info" | "part") => {
      const v = p[key];
      return v && typeof v === "object" && "sessionID" in v ? (v as { sessionID: unknown }).sessionID : undefined;
    };
    const sessionId = p.sessionID ?? nested("info") ?? nested("part");
    return sessionId === this.ids.agentSessionId;
  }

  private setStatus(type: string, out: Out, retryMessage?: string): void {
    if (type === "busy" || type === "retry") {
      this.statusBusy = true;
      if (type === "retry") out.retry = this.retryError = classifyRetry(retryMessage);
    } else if (type === "idle") {
      this.statusBusy = false;
      // The turn is over: whatever is still open ends here, with the text seen so far.
      for (const id of this.openMessages()) {
        const m = this.message(id);
        this.finalize(m, out);
        if (m.completedAt === null) this.cutShort.set(id, m);
      }
      while (this.cutShort.size > CUT_SHORT_MEMORY) this.cutShort.delete(this.cutShort.keys().next().value as string);
    }
  }

  /** A message an idle boundary cut short gets content: open again, to be announced again (see `cutShort`). */
  private reopen(id: string): boolean {
    const m = this.cutShort.get(id);
    if (!m) return false;
    this.cutShort.delete(id);
    this.done.delete(id);
    this.reopened.add(id);
    while (this.reopened.size > CUT_SHORT_MEMORY) this.reopened.delete(this.reopened.values().next().value as string);
    m.announced = false;
    this.messages.set(id, m);
    return true;
  }

  private message(id: string): MessageState {
    let m = this.messages.get(id);
    if (!m) {
      m = { id, role: null, createdAt: null, completedAt: null, parts: new Map(), announced: false, error: null, model: null };
      this.messages.set(id, m);
    }
    return m;
  }

  private messageUpdated(info: z.infer<typeof MessageInfo>, out: Out): void {
    if (this.done.has(info.id)) return;
    if (info.role !== "user" && info.role !== "assistant") return;
    const m = this.message(info.id);
    m.role = info.role;
    m.createdAt = info.time.created;
    m.completedAt = info.time.completed ?? null;
    if (m.role === "user") {
      if ([...m.parts.values()].some((p) => p.type === "text")) this.record(m, out);
      return;
    }
    if (info.providerID && info.modelID) m.model = this.turnModel = `${info.providerID}/${info.modelID}`;
    const error = info.error === undefined ? null : classifyAgentError(info.error);
    this.announce(m, out);
    if (error) {
      m.error = error;
      this.noteError(error, m.id, out);
    }
    if (m.completedAt === null) return;
    // Completed before any of its content arrived (seen under load after an agent tool ran
    // mid-turn: the answer's first `message.updated` already carried its completion, and its
    // step, text and deltas came after): held open rather than finalized empty, so no client
    // gets an empty `message.finalize` before the text. OpenCode sends `message.updated` again
    // after the parts, which finalizes it; the idle boundary does at the latest.
    if (!error && !hasContent(m)) return;
    this.finalize(m, out);
  }

  private partUpdated(part: z.infer<typeof PartUpdatedProps>["part"], out: Out): void {
    const cut = this.cutShort.get(part.messageID);
    // Only text reopens one: after an abort OpenCode still updates the aborted tool call (its status).
    const more = (part.type === "text" && !part.synthetic && !part.ignored && (part.text ?? "").length > (cut?.parts.get(part.id)?.text.length ?? 0));
    if (this.done.has(part.messageID) && !(more && this.reopen(part.messageID))) return;
    const m = this.message(part.messageID);
    if (part.type === "text") {
      this.setText(m, part.id, part.text ?? "", part.synthetic === true || part.ignored === true, out);
      if (m.role === "user") this.record(m, out);
      else if (m.role === "assistant" && !m.announced && textOf(m) !== "") this.announce(m, out);
      // Reopened after its completion: this full text is its last word.
      if (m.role === "assistant" && m.completedAt !== null && this.reopened.has(m.id)) this.finalize(m, out);
    } else if (part.type === "tool") {
      const status = ToolStatusSchema.safeParse(part.state?.status);
      if (!status.success) return;
      // Only assistant messages call tools.
      if (m.role === null) m.role = "assistant";
      this.setTool(m, part.id, part.tool ?? "unknown", status.data, part.state, out);
      if (!m.announced) this.announce(m, out);
    } else if (!m.parts.has(part.id)) {
      // Reasoning, step markers, files: remembered by type so their deltas are not taken for text.
      this.newPart(m, part.id, part.type);
    }
  }

  private textDelta(messageId: string, partId: string, delta: string, out: Out): void {
    if (delta === "") return;
    if (this.done.has(messageId) && !((this.cutShort.get(messageId)?.parts.get(partId)?.type ?? "text") === "text" && this.reopen(messageId))) return;
    const m = this.message(messageId);
    const known = m.parts.get(partId);
    // Reasoning parts stream deltas on the same field: only text parts are the answer.
    if (known && known.type !== "text") return;
    const part = known ?? this.newPart(m, partId, "text");
    part.text += delta;
    // The model answers again: whatever was retried is behind us.
    if (m.role !== "user") {
      this.retryError = null;
      this.turnOutput = true;
    }
    if (m.role === "user") return;
    // Only assistant messages stream.
    m.role = "assistant";
    if (!m.announced) this.announce(m, out);
    else out.client.push({ type: "message.part.text-delta", messageId: m.id, partId, delta });
  }

  private newPart(m: MessageState, partId: string, type: string): PartState {
    const part: PartState = { partId, type, text: "", hidden: false, tool: null, status: null, title: null, input: null, output: null, toolError: null };
    m.parts.set(partId, part);
    return part;
  }

  /** Full text of a part: clients get what they have not seen yet as a delta (a reconnect can skip deltas). */
  private setText(m: MessageState, partId: string, text: string, hidden: boolean, out: Out): void {
    const part = m.parts.get(partId) ?? this.newPart(m, partId, "text");
    const before = part.text;
    part.type = "text";
    part.text = text;
    part.hidden = hidden;
    if (m.role === "assistant" && !hidden && text !== "") this.turnOutput = true;
    if (m.role === "assistant" && m.announced && !hidden && text.length > before.length && text.startsWith(before)) {
      out.client.push({ type: "message.part.text-delta", messageId: m.id, partId, delta: text.slice(before.length) });
    }
  }

  private setTool(m: MessageState, partId: string, tool: string, status: ToolStatus, state: ToolState, out: Out): void {
    const part = m.parts.get(partId) ?? this.newPart(m, partId, "tool");
    this.retryError = null;
    this.turnOutput = true;
    const title = state?.title ?? null;
    // OpenCode sends `{}` while the call's arguments are still streaming in.
    const input = state?.input && Object.keys(state.input).length > 0 ? (clipToolValue(state.input) as Record<string, unknown>) : part.input;
    const output = status === "completed" && state?.output !== undefined ? clipToolText(state.output) : null;
    const toolError = status === "error" ? clipToolText(state?.error ?? "the tool call failed") : null;
    const changed = part.status !== status || part.title !== title || JSON.stringify(part.input) !== JSON.stringify(input);
    Object.assign(part, { type: "tool", tool, status, title, input, output, toolError });
    if (m.announced && changed) out.client.push(toolUpdate(m.id, part));
  }

  /** `message.create`, then whatever the message already holds (parts seen before it was known to be the assistant's). */
  private announce(m: MessageState, out: Out): void {
    if (m.announced || this.done.has(m.id)) return;
    m.announced = true;
    m.role = "assistant";
    out.client.push({ type: "message.create", messageId: m.id, role: "assistant" });
    for (const part of m.parts.values()) {
      if (part.type === "text" && !part.hidden && part.text !== "") out.client.push({ type: "message.part.text-delta", messageId: m.id, partId: part.partId, delta: part.text });
      if (part.type === "tool" && part.status !== null) out.client.push(toolUpdate(m.id, part));
    }
  }

  private finalize(m: MessageState, out: Out): void {
    if (this.done.has(m.id)) return;
    this.markDone(m.id);
    // A message the turn's failure left open ends with that failure.
    m.error ??= this.turnError ?? this.retryError;
    out.client.push({ type: "message.finalize", messageId: m.id, text: textOf(m), reason: finishReasonOf(m.error), ...(m.error ? { error: m.error } : {}) });
    this.record(m, out);
    // Finalized before any of its text arrived (at an idle boundary that came before the text):
    // text that still comes reopens it, as after an early idle.
    if (m.role === "assistant" && !m.error && !hasContent(m)) this.cutShort.set(m.id, m);
    while (this.cutShort.size > CUT_SHORT_MEMORY) this.cutShort.delete(this.cutShort.keys().next().value as string);
  }

  private markDone(id: string): void {
    this.done.add(id);
    if (this.done.size > DONE_MEMORY) {
      const oldest = this.done.values().next();
      if (!oldest.done) this.done.delete(oldest.value);
    }
  }

  /** A transcript record for `m`, unless it is unchanged since the last one. */
  private record(m: MessageState, out: Out): void {
    if (m.role === null) return;
    if (m.createdAt === null) {
      out.gaps = true;
      return;
    }
    const parts: TranscriptPart[] = [];
    for (const p of m.parts.values()) {
      if (p.type === "text" && !p.hidden) parts.push({ partId: p.partId, type: "text", text: p.text });
      if (p.type === "tool" && m.role === "assistant") {
        parts.push({
          partId: p.partId,
          type: "tool",
          tool: p.tool ?? "unknown",
          ...(p.status ? { status: p.status } : {}),
          ...(p.input ? { input: p.input } : {}),
          ...(p.output !== null ? { output: p.output } : {}),
          ...(p.toolError !== null ? { error: p.toolError } : {}),
        });
      }
    }
    const previous = this.recorded.get(m.id);
    // A user message sent again under its own id (relay/empty-turns.ts) gets a new creation time
    // from OpenCode: it keeps its first one, so the transcript holds it once, in its place.
    const createdAt = m.role === "user" && previous ? previous.createdAt : new Date(m.createdAt).toISOString();
    const record: TranscriptMessage = {
      sessionId: this.ids.sessionId,
      messageId: m.id,
      role: m.role,
      text: textOf(m),
      parts,
      createdAt,
      // A user message is complete when it is stored.
      completedAt: m.role === "user" ? createdAt : m.completedAt === null ? null : new Date(m.completedAt).toISOString(),
      // How an assistant message ended, once it did.
      ...(m.role === "assistant" && this.done.has(m.id) ? { reason: finishReasonOf(m.error) } : {}),
      ...(m.role === "assistant" && m.error ? { error: m.error } : {}),
    };
    const digest = recordDigest(record);
    if (previous?.digest === digest) return;
    this.remember(m.id, { digest, createdAt });
    out.finalized.push(record);
  }

  /** One stored message from the agent's API after a (re)connect. */
  private resync(stored: AgentMessage, newestTurn: boolean, out: Out): void {
    const role = stored.info.role;
    if (role !== "user" && role !== "assistant") return;
    const wasKnown = this.messages.has(stored.info.id);
    const m = this.message(stored.info.id);
    m.role = role;
    m.createdAt = stored.info.time.created;
    m.completedAt = stored.info.time.completed ?? null;
    if (role === "assistant" && stored.info.error !== undefined) m.error = classifyAgentError(stored.info.error);
    const finished = this.done.has(m.id);
    // Clients hear about it only when it is in flight here, or belongs to the turn in progress.
    const live = !finished && role === "assistant" && (m.announced || newestTurn);
    if (live && !m.announced) {
      // Fill the parts first: the announcement carries the text so far.
      for (const p of stored.parts) this.storedPart(m, p, null);
      this.announce(m, out);
    } else {
      for (const p of stored.parts) this.storedPart(m, p, live ? out : null);
    }
    if (role === "user") this.record(m, out);
    else if (m.completedAt !== null) {
      if (live) this.finalize(m, out);
      else {
        this.markDone(m.id);
        this.record(m, out);
      }
    }
    // Nothing to remember for a message that was already history.
    if (!wasKnown && !live) this.messages.delete(m.id);
  }

  private storedPart(m: MessageState, p: AgentMessage["parts"][number], out: Out | null): void {
    const sink: Out = out ?? emptyOut();
    if (p.type === "text") this.setText(m, p.id, p.text ?? "", p.synthetic === true || p.ignored === true, sink);
    else if (p.type === "tool") {
      const status = ToolStatusSchema.safeParse(p.state?.status);
      if (status.success) this.setTool(m, p.id, p.tool ?? "unknown", status.data, p.state, sink);
    }
  }

  /** At the idle boundary: every finished message is recorded; only ids of finalized ones are kept. */
  private prune(): void {
    for (const m of [...this.messages.values()]) {
      if (m.role === "user" || this.done.has(m.id)) this.messages.delete(m.id);
    }
  }
}

function toolUpdate(messageId: string, part: PartState): RelayClientMessage {
  return {
    type: "message.part.tool-update",
    messageId,
    partId: part.partId,
    tool: part.tool ?? "unknown",
    status: part.status ?? "pending",
    ...(part.title !== null ? { title: part.title } : {}),
    ...(part.input !== null ? { input: part.input } : {}),
    ...(part.output !== null ? { output: part.output } : {}),
    ...(part.toolError !== null ? { error: part.toolError } : {}),
  };
}

/** Anything of an answer a client would show: text, or a tool call. */
function hasContent(m: MessageState): boolean {
  return textOf(m) !== "" || [...m.parts.values()].some((p) => p.type === "tool");
}

function textOf(m: MessageState): string {
  return [...m.parts.values()]
    .filter((p) => p.type === "text" && !p.hidden)
    .map((p) => p.text)
    .join("");
}
