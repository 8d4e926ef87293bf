/** A fake OpenCode for relay tests: the event stream, status and stored messages are driven by the test. */
import { AgentUnavailableError } from "../../functions/domain/errors";
import type { AgentClient, AgentEndpoint, AgentEvent } from "../../functions/ports/agent-client";
import type { AgentMessage, AgentMessageSource } from "../../functions/relay/agent-messages";
import type { OpenCodePermissionRequest } from "../../functions/relay/permission-asks";

/**
 * OpenCode as the relay sees it: `prompt_async` starts a turn (busy, the user message, an
 * assistant message streaming `echo: ` + text in two deltas) that stays open until `finish`.
 */
export class FakeOpenCode implements AgentClient, AgentMessageSource {
  readonly prompts: { agentSessionId: string; text: string }[] = [];
  /**
   * On: like each sandbox's OpenCode with its own server password. `ensureSession` needs an
   * authorization and binds the agent session to it; every later call about that session must
   * carry the same one, and the event stream one of the bound ones. Anything else fails as the
   * HTTP client reports a 401 (not retryable), the event stream included.
   */
  requireAuthorization = false;
  /** Calls refused for a missing or wrong authorization. */
  refused = 0;
  /** On: the server is gone (its sandbox died): every new event stream fails as a refused connection. */
  unreachable = false;
  /**
   * On: the sandbox is gone behind a connection that stays open (a tunnel that accepts and never
   * answers): open streams deliver nothing more, new ones never send a byte; none ends until aborted.
   */
  silent = false;
  /** OpenCode's `server.heartbeat` on every open stream every this many ms (null: none, the default). */
  heartbeatEveryMs: number | null = null;
  private readonly authorizations = new Map<string, string>();
  private readonly subscribers = new Set<(event: AgentEvent) => void>();
  /** Ends every open event stream (the server side of an SSE connection dropping). */
  private readonly enders = new Set<() => void>();
  private readonly state = new Map<string, { busy: boolean; messages: AgentMessage[] }>();
  private sessionIds = 0;
  private turns = 0;

  /** Every open event stream ends, as when the network drops or the sandbox goes away. */
  dropStreams(): void {
    for (const end of [...this.enders]) end();
  }

  subscriberCount(): number {
    return this.subscribers.size;
  }

  ensureSession(endpoint: AgentEndpoint, existingId?: string | null): Promise<string> {
    const refused = this.refusal(endpoint, "ensureSession", existingId);
    if (refused) return Promise.reject(refused);
    const id = existingId ?? `ses_fake${++this.sessionIds}`;
    if (this.requireAuthorization && endpoint.authorization) this.authorizations.set(id, endpoint.authorization);
    if (!this.state.has(id)) this.state.set(id, { busy: false, messages: [] });
    return Promise.resolve(id);
  }

  readonly permissionReplies: { permissionId: string; response: string }[] = [];
  replyPermission(endpoint: AgentEndpoint, permissionId: string, response: string): Promise<void> {
    const refused = this.refusal(endpoint, "replyPermission", null);
    if (refused) return Promise.reject(refused);
    this.permissionReplies.push({ permissionId, response });
    return Promise.resolve();
  }

  /** Permission requests the agent waits on, by agent session (OpenCode `GET /permission`). */
  readonly pending = new Map<string, OpenCodePermissionRequest[]>();
  pendingPermissions(endpoint: AgentEndpoint, agentSessionId: string): Promise<OpenCodePermissionRequest[]> {
    const refused = this.refusal(endpoint, "pendingPermissions", agentSessionId);
    if (refused) return Promise.reject(refused);
    return Promise.resolve(this.pending.get(agentSessionId) ?? []);
  }

  promptAsync(endpoint: AgentEndpoint, agentSessionId: string, text: string): Promise<void> {
    const refused = this.refusal(endpoint, "promptAsync", agentSessionId);
    if (refused) return Promise.reject(refused);
    this.prompts.push({ agentSessionId, text });
    const s = this.session(agentSessionId);
    const n = ++this.turns;
    const created = 1_000 * n;
    const user: AgentMessage = { info: { id: `msg_${n}u`, role: "user", time: { created } }, parts: [{ id: `prt_${n}u`, type: "text", text }] };
    const assistant: AgentMessage = { info: { id: `msg_${n}a`, role: "assistant", time: { created: created + 1 } }, parts: [{ id: `prt_${n}a`, type: "text", text: `echo: ${text}` }] };
    s.busy = true;
    s.messages.push(user, assistant);
    const sid = { sessionID: agentSessionId };
    this.emit({ type: "session.status", properties: { ...sid, status: { type: "busy" } } });
    this.emit({ type: "message.updated", properties: { ...sid, info: { ...user.info, sessionID: agentSessionId } } });
    this.emit({ type: "message.part.updated", properties: { ...sid, part: { ...user.parts[0], messageID: user.info.id, sessionID: agentSessionId } } });
    this.emit({ type: "message.updated", properties: { ...sid, info: { ...assistant.info, sessionID: agentSessionId } } });
    this.emit({ type: "message.part.updated", properties: { ...sid, part: { id: `prt_${n}a`, type: "text", text: "", messageID: assistant.info.id, sessionID: agentSessionId } } });
    for (const delta of ["echo: ", text]) {
      this.emit({ type: "message.part.delta", properties: { ...sid, messageID: assistant.info.id, partID: `prt_${n}a`, field: "text", delta } });
    }
    return Promise.resolve();
  }

  /** Ends the turn in progress: the full part text, the completed message, idle. */
  finish(agentSessionId: string): void {
    const s = this.session(agentSessionId);
    const assistant = s.messages.at(-1);
    if (!assistant || assistant.info.time.completed !== undefined) throw new Error("no turn in progress");
    assistant.info.time.completed = assistant.info.time.created + 500;
    const sid = { sessionID: agentSessionId };
    this.emit({ type: "message.part.updated", properties: { ...sid, part: { ...assistant.parts[0], messageID: assistant.info.id, sessionID: agentSessionId } } });
    this.emit({ type: "message.updated", properties: { ...sid, info: { ...assistant.info, sessionID: agentSessionId } } });
    s.busy = false;
    this.emit({ type: "session.status", properties: { ...sid, status: { type: "idle" } } });
    this.emit({ type: "session.idle", properties: sid });
  }

  abort(endpoint: AgentEndpoint, agentSessionId: string): Promise<void> {
    const refused = this.refusal(endpoint, "abort", agentSessionId);
    if (refused) return Promise.reject(refused);
    if (this.session(agentSessionId).busy) this.finish(agentSessionId);
    return Promise.resolve();
  }

  isBusy(endpoint: AgentEndpoint, agentSessionId: string): Promise<boolean> {
    const refused = this.refusal(endpoint, "isBusy", agentSessionId);
    if (refused) return Promise.reject(refused);
    return Promise.resolve(this.session(agentSessionId).busy);
  }

  listMessages(endpoint: AgentEndpoint, agentSessionId: string): Promise<AgentMessage[]> {
    const refused = this.refusal(endpoint, "listMessages", agentSessionId);
    if (refused) return Promise.reject(refused);
    return Promise.resolve(structuredClone(this.session(agentSessionId).messages));
  }

  async *events(endpoint: AgentEndpoint, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const refused = this.refusal(endpoint, "events");
    if (refused) throw refused;
    if (this.unreachable) throw new AgentUnavailableError("OpenCode events failed: connect ECONNREFUSED", { retryable: true });
    if (this.silent) {
      await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true })));
      return;
    }
    const queue: AgentEvent[] = [];
    let wake: (() => void) | null = null;
    let ended = false;
    const subscriber = (event: AgentEvent) => {
      if (this.silent) return;
      queue.push(event);
      wake?.();
    };
    const heartbeats = this.heartbeatEveryMs === null ? null : setInterval(() => subscriber({ type: "server.heartbeat", properties: {} }), this.heartbeatEveryMs);
    const onAbort = () => wake?.();
    const end = () => {
      ended = true;
      wake?.();
    };
    this.subscribers.add(subscriber);
    this.enders.add(end);
    signal.addEventListener("abort", onAbort);
    try {
      yield { type: "server.connected", properties: {} };
      while (!signal.aborted && !ended) {
        const next = queue.shift();
        if (next) {
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
      }
    } finally {
      if (heartbeats) clearInterval(heartbeats);
      this.subscribers.delete(subscriber);
      this.enders.delete(end);
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** OpenCode's 401 for a call without the authorization its session is bound to, as the HTTP client reports it. */
  private refusal(endpoint: AgentEndpoint, operation: string, agentSessionId?: string | null): AgentUnavailableError | null {
    if (!this.requireAuthorization) return null;
    const given = endpoint.authorization;
    const bound = agentSessionId ? this.authorizations.get(agentSessionId) : undefined;
    const ok =
      given !== null &&
      (operation === "ensureSession"
        ? bound === undefined || bound === given
        : operation === "events"
          ? [...this.authorizations.values()].includes(given)
          : bound === given);
    if (ok) return null;
    this.refused++;
    return new AgentUnavailableError(`OpenCode ${operation} failed: HTTP 401`, { retryable: false, context: { operation, httpStatus: 401 } });
  }

  /** A copy per subscriber, as if serialized: later changes to the stored messages must not leak into queued events. */
  private emit(event: AgentEvent): void {
    for (const s of this.subscribers) s(structuredClone(event));
  }

  private session(id: string) {
    const s = this.state.get(id);
    if (!s) throw new Error(`unknown agent session ${id}`);
    return s;
  }
}
