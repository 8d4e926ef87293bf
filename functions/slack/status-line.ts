/**
 * Progress in the session's Slack thread (issue 17): fed with the messages the session's clients
 * get (the relay's translated agent events and the flows' statuses, services/broadcast.ts), it
 * keeps one status line per session up to date with `chat.update` (creating, running, the
 * current tool) at most once per `minUpdateMs` (the latest state wins, a trailing update follows),
 * posts each finished assistant message's text in the thread (split under Slack's limit), and
 * posts failures and pauses with what to do next. Sessions without a thread are ignored.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";
import type { SessionStore } from "../ports/session-store";
import type { SlackStore, SlackThread } from "../ports/slack";
import { splitForSlack, type SlackOutbox } from "./outbox";

export type ClientMessage = { type: string } & Record<string, unknown>;

/** The status line with its buttons (`stop`, `pause`, `resume`: /slack/interactions). */
export function statusBlocks(sessionId: string, text: string): unknown[] {
  const button = (action: string, label: string) => ({ type: "button", action_id: action, value: sessionId, text: { type: "plain_text", text: label } });
  return [
    { type: "section", text: { type: "mrkdwn", text } },
    { type: "actions", elements: [button("pause", "Pause"), button("resume", "Resume"), button("stop", "Stop")] },
  ];
}

interface Line {
  thread: SlackThread;
  lastAt: number;
  shown: string;
  pending: string | null;
  timer: NodeJS.Timeout | null;
}

export interface SlackProgressDeps {
  store: Pick<SlackStore, "threadBySession">;
  sessions: Pick<SessionStore, "getSession">;
  outbox: SlackOutbox;
  logger: Logger;
  now: () => Date;
  /** Default 1000: at most one status update per second per session. */
  minUpdateMs?: number;
}

const STATUS_TEXT: Record<string, string> = {
  creating: "Status: creating the sandbox",
  resuming: "Status: resuming",
  running: "Status: running",
  migrating: "Status: migrating to a fresh sandbox",
  paused: "Status: paused (reply in this thread to wake it)",
  stopped: "Status: stopped (start a new session with the slash command)",
  error: "Status: error (reply in this thread to try again)",
};

export class SlackProgress {
  private readonly slack = new Map<string, boolean>();
  private readonly lines = new Map<string, Line>();
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly deps: SlackProgressDeps) {}

  /** Called for every message a session's clients are sent; never throws, never blocks the sender. */
  observe(sessionId: string, message: ClientMessage): void {
    if (this.slack.get(sessionId) === false) return;
    // One chain: a session's posts keep their order.
    this.chain = this.chain
      .then(() => this.handle(sessionId, message))
      .catch((err: unknown) => this.deps.logger.warn("slack progress failed", { sessionId, type: message.type, error: errorForLog(err) }));
  }

  /** Resolves once everything observed so far is posted (tests, shutdown). */
  async settled(): Promise<void> {
    let seen: Promise<void>;
    do {
      seen = this.chain;
      await seen;
    } while (seen !== this.chain);
  }

  close(): void {
    for (const line of this.lines.values()) if (line.timer) clearTimeout(line.timer);
  }

  private async threadOf(sessionId: string): Promise<SlackThread | null> {
    const line = this.lines.get(sessionId);
    if (line) return line.thread;
    if (this.slack.get(sessionId) === undefined) {
      const session = await this.deps.sessions.getSession(sessionId);
      if (!session) return null;
      this.slack.set(sessionId, session.clientType === "slack");
      if (session.clientType !== "slack") return null;
    }
    const thread = await this.deps.store.threadBySession(sessionId);
    if (thread) this.lines.set(sessionId, { thread, lastAt: 0, shown: "", pending: null, timer: null });
    return thread;
  }

  private async handle(sessionId: string, message: ClientMessage): Promise<void> {
    const thread = await this.threadOf(sessionId);
    if (!thread) return;
    const post = (key: string, text: string) => this.deps.outbox.post(key, { channel: thread.channelId, threadTs: thread.threadTs, text });
    switch (message.type) {
      case "status":
      case "error":
        await this.statusNote(sessionId, message, this.deps.now().toISOString(), post);
        return;
      case "message.create":
        this.status(sessionId, "Status: running (thinking)");
        return;
      case "message.part.tool-update": {
        const tool = typeof message.tool === "string" ? message.tool : "a tool";
        this.status(sessionId, `Status: running (tool: ${tool})`);
        return;
      }
      case "message.finalize": {
        const messageId = String(message.messageId);
        const text = typeof message.text === "string" ? message.text.trim() : "";
        const error = message.error as { message?: string } | undefined;
        if (text) {
          const parts = splitForSlack(text);
          for (const [i, part] of parts.entries()) await post(`turn:${sessionId}:${messageId}:${i}`, part);
        }
        if (error) await post(`turn:${sessionId}:${messageId}:error`, `The agent's turn failed: ${error.message ?? "unknown error"}. Reply in this thread to try again.`);
        this.status(sessionId, "Status: running (idle, waiting for a reply in this thread)");
        return;
      }
      default:
        return;
    }
  }

  /**
   * A status forwarded by the flows' Lambdas through the Slack queue (status-forward.ts): the same
   * status line and notes as an observed broadcast, posted before it resolves (the worker awaits
   * it). `key` is the forwarded delivery's: a redelivery posts nothing twice.
   */
  async deliver(sessionId: string, message: ClientMessage, key: string): Promise<void> {
    if (message.type !== "status" && message.type !== "error") return;
    const thread = await this.threadOf(sessionId);
    if (!thread) return;
    // No trailing timer in a Lambda that may freeze: the line is updated now.
    await this.statusNote(sessionId, message, key, (postKey, text) => this.deps.outbox.post(postKey, { channel: thread.channelId, threadTs: thread.threadTs, text }), true);
    await this.settled();
  }

  /** A `status` frame (the status line; pauses and errors posted with what to do next) or a flow's `error` frame. */
  private async statusNote(sessionId: string, message: ClientMessage, key: string, post: (key: string, text: string) => Promise<string>, immediate = false): Promise<void> {
    if (message.type === "error") {
      const text = typeof message.message === "string" ? message.message : String(message.code ?? "a lifecycle step failed");
      await post(`failed:${sessionId}:${key}`, `${text}. Reply in this thread to try again, or use the buttons on the status line.`);
      return;
    }
    const status = String(message.status);
    this.status(sessionId, STATUS_TEXT[status] ?? `Status: ${status}`, immediate);
    if (status === "error") await post(`error:${sessionId}:${key}`, `The session failed${message.message ? `: ${String(message.message)}` : ""}. Reply in this thread to try again.`);
    if (status === "paused") await post(`paused:${sessionId}:${key}`, `Paused${message.message ? ` (${String(message.message)})` : " to save resources"}. Reply in this thread to wake it.`);
  }

  /** Throttled status line: at once when the last update is `minUpdateMs` old, else the latest text after the rest of it. */
  private status(sessionId: string, text: string, immediate = false): void {
    const line = this.lines.get(sessionId);
    if (!line || (line.pending === null && line.shown === text)) return;
    line.pending = text;
    if (line.timer && immediate) {
      clearTimeout(line.timer);
      line.timer = null;
    }
    if (line.timer) return;
    const wait = immediate ? 0 : Math.max(0, line.lastAt + (this.deps.minUpdateMs ?? 1000) - this.deps.now().getTime());
    const flush = () => {
      line.timer = null;
      const next = line.pending;
      line.pending = null;
      if (next === null || next === line.shown) return;
      line.lastAt = this.deps.now().getTime();
      line.shown = next;
      this.chain = this.chain
        .then(() => this.deps.outbox.update(`status:${sessionId}`, { channel: line.thread.channelId, text: next, blocks: statusBlocks(sessionId, next) }))
        .then(() => undefined)
        .catch((err: unknown) => this.deps.logger.warn("slack status update failed", { sessionId, error: errorForLog(err) }));
    };
    if (wait === 0) flush();
    else {
      line.timer = setTimeout(flush, wait);
      line.timer.unref();
    }
  }
}
