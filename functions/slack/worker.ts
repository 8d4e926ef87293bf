/**
 * The Slack worker (API.md "Slack"; ARCHITECTURE.md §9): takes the deliveries the ack function
 * enqueued, maps the team to its org, and starts or prompts sessions through the ordinary route
 * handlers (session-api.ts) as `slack:<teamId>:<userId>`. One thread per session, one session per
 * thread: a start is claimed per delivery (a redelivery gets the same session id back, and the
 * create with that id is a 409 the second time), a thread message is sent as a prompt with
 * `Idempotency-Key: slack:<channel>:<ts>` (a message that also mentions the bot arrives twice, as
 * `message` and `app_mention`; a redelivery after a crash at any point repeats it): one prompt.
 * Problems the user can fix (unbound team, bad repo, empty prompt, budget) are answered with an
 * ephemeral or thread message and create nothing; anything else throws, so the queue redelivers.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { WebClient } from "@slack/web-api";
import * as z from "zod";
import type { HttpDeps } from "../http/http-handler";
import type { SlackDelivery, SlackStore, SlackThread, SlackWorkspace } from "../ports/slack";
import { parseSlackCommand } from "./command-text";
import { SlackOutbox } from "./outbox";
import { isBudgetExhausted, slackPrincipal, SlackSessionApi, type ApiAnswer } from "./session-api";
import { SlackProgress, statusBlocks } from "./status-line";
import { SLACK_USAGE } from "./usage";

export interface SlackWorkerDeps {
  http: HttpDeps;
  store: SlackStore;
  web: WebClient;
  logger: Logger;
  now: () => Date;
  /** The status line's throttle (SlackProgress); default 1000 ms. */
  minUpdateMs?: number;
}

const StatusPayload = z.object({ sessionId: z.string().min(1), message: z.looseObject({ type: z.string() }) });

const CommandPayload = z.object({
  team_id: z.string().min(1),
  user_id: z.string().min(1),
  channel_id: z.string().min(1),
  text: z.string().default(""),
  trigger_id: z.string().min(1),
});

const EventPayload = z.object({
  team_id: z.string().min(1),
  event: z.looseObject({
    type: z.string(),
    user: z.string().optional(),
    text: z.string().optional(),
    channel: z.string().optional(),
    ts: z.string().optional(),
    thread_ts: z.string().optional(),
    bot_id: z.string().optional(),
    subtype: z.string().optional(),
  }),
});

const InteractionPayload = z.looseObject({
  type: z.string(),
  team: z.object({ id: z.string() }),
  user: z.object({ id: z.string() }),
  channel: z.object({ id: z.string() }).optional(),
  actions: z.array(z.looseObject({ action_id: z.string(), value: z.string().optional() })).default([]),
});

export const UNBOUND_TEAM_TEXT =
  "This Slack workspace is not connected to an org yet: an admin binds it with `PUT /v1/slack/workspace {\"teamId\": \"<team id>\"}`. Nothing was started.";

export class SlackWorker {
  readonly outbox: SlackOutbox;
  /** The status line and the thread's notes: forwarded statuses here, observed broadcasts where the process sees them. */
  readonly progress: SlackProgress;
  private readonly api: SlackSessionApi;

  constructor(private readonly deps: SlackWorkerDeps) {
    this.outbox = new SlackOutbox(deps.web, deps.store, deps.now);
    this.progress = new SlackProgress({ store: deps.store, sessions: deps.http.sessions, outbox: this.outbox, logger: deps.logger, now: deps.now, ...(deps.minUpdateMs !== undefined ? { minUpdateMs: deps.minUpdateMs } : {}) });
    this.api = new SlackSessionApi(deps.http);
  }

  async handle(delivery: SlackDelivery): Promise<void> {
    if (delivery.kind === "status") return this.status(delivery);
    if (delivery.kind === "command") return this.command(delivery);
    if (delivery.kind === "event") return this.event(delivery);
    return this.interaction(delivery);
  }

  /** A status a flow's Lambda forwarded (status-forward.ts): posted for Slack sessions only, once per delivery key. */
  private async status(delivery: SlackDelivery): Promise<void> {
    let json: unknown;
    try {
      json = JSON.parse(delivery.body);
    } catch {
      json = null;
    }
    const parsed = StatusPayload.safeParse(json);
    if (!parsed.success) {
      this.deps.logger.warn("slack status dropped: unreadable payload", { key: delivery.key });
      return;
    }
    await this.progress.deliver(parsed.data.sessionId, parsed.data.message, delivery.key);
  }

  private ephemeral(channel: string, user: string, text: string): Promise<unknown> {
    return this.deps.web.chat.postEphemeral({ channel, user, text });
  }

  private async command(delivery: SlackDelivery): Promise<void> {
    const parsed = CommandPayload.safeParse(Object.fromEntries(new URLSearchParams(delivery.body)));
    if (!parsed.success) {
      this.deps.logger.warn("slack command dropped: unreadable payload", { key: delivery.key });
      return;
    }
    const { team_id: teamId, user_id: userId, channel_id: channelId, text } = parsed.data;
    const workspace = await this.deps.store.getWorkspace(teamId);
    if (!workspace) {
      await this.ephemeral(channelId, userId, UNBOUND_TEAM_TEXT);
      return;
    }
    await this.runText(workspace, { userId, channelId, text, startKey: delivery.key, underTs: null });
  }

  /** A command's or a mention's text: help, `repo ...`, or a start. */
  private async runText(workspace: SlackWorkspace, input: { userId: string; channelId: string; text: string; startKey: string; underTs: string | null }): Promise<void> {
    const command = parseSlackCommand(input.text);
    const { userId, channelId } = input;
    if (command.type === "help") {
      await this.ephemeral(channelId, userId, SLACK_USAGE);
      return;
    }
    if (command.type === "invalid") {
      await this.ephemeral(channelId, userId, `${command.message}. Nothing was started.`);
      return;
    }
    if (command.type === "set-repo") {
      await this.deps.store.setChannelDefaultRepo(workspace.teamId, channelId, command.repo, this.deps.now());
      await this.ephemeral(channelId, userId, `This channel's default repository is now ${command.repo}.`);
      return;
    }
    const repo = command.repo ?? (await this.deps.store.channelDefaultRepo(workspace.teamId, channelId)) ?? workspace.defaultRepo;
    if (!repo) {
      await this.ephemeral(channelId, userId, "No repository: name one (`<owner>/<repo> <prompt>`) or set the channel's default (`repo <owner>/<repo>`). Nothing was started.");
      return;
    }
    await this.start(workspace, { ...input, repo, prompt: command.prompt });
  }

  private async start(workspace: SlackWorkspace, input: { userId: string; channelId: string; repo: string; prompt: string; startKey: string; underTs: string | null }): Promise<void> {
    const { userId, channelId, repo, prompt } = input;
    const principal = slackPrincipal(workspace.orgId, workspace.teamId, userId);
    const claim = await this.deps.store.claimStart(input.startKey, this.deps.http.newSessionId(), this.deps.now());
    const sessionId = claim.sessionId;
    // A redelivery whose session exists already carries on with it (no create: at the org's cap it would be refused).
    const existing = claim.fresh ? null : await this.deps.http.sessions.getSession(sessionId);
    const created: ApiAnswer = existing
      ? { status: 409, body: {}, code: "conflict", message: null }
      : await this.api.call(principal, "CreateSession", {
          path: "/v1/sessions",
          body: { clientType: "slack", title: titleOf(prompt), repos: [{ url: repo }], initialPrompt: prompt },
          newSessionId: sessionId,
        });
    // 409: this delivery's session exists already (a redelivery after a crash): carry on with it.
    if (created.status !== 201 && created.status !== 409) {
      if (created.status >= 500) throw new Error(`slack start: create answered ${created.status}`);
      await this.ephemeral(channelId, userId, refusal("start a session", created));
      return;
    }
    const parentTs = await this.outbox.post(`parent:${sessionId}`, {
      channel: channelId,
      ...(input.underTs ? { threadTs: input.underTs } : {}),
      text: `<@${userId}> asked on ${repo}:\n>${prompt.split("\n").join("\n>")}`,
    });
    const thread: SlackThread = { sessionId, teamId: workspace.teamId, channelId, threadTs: input.underTs ?? parentTs, userId };
    await this.deps.store.putThread(thread, this.deps.now());
    await this.outbox.post(`status:${sessionId}`, { channel: channelId, threadTs: thread.threadTs, text: "Status: creating", blocks: statusBlocks(sessionId, "Status: creating") });
    // A redelivery of a start that got this far before: the session runs (or ran) already; only a
    // session never provisioned is resumed again (a resume of a running one would be a wake request).
    if (created.status === 409 && (existing ?? (await this.deps.http.sessions.getSession(sessionId)))?.status !== "starting") return;
    const resumed = await this.api.call(principal, "ResumeSession", { path: `/v1/sessions/${sessionId}/resume`, params: { id: sessionId } });
    if (resumed.status >= 500) throw new Error(`slack start: resume answered ${resumed.status}`);
    if (resumed.status >= 400 && resumed.status !== 409) {
      await this.outbox.post(`start-failed:${sessionId}`, { channel: channelId, threadTs: thread.threadTs, text: refusal("start the sandbox", resumed) });
    }
    this.deps.logger.info("slack session started", { sessionId, teamId: workspace.teamId, channelId });
  }

  private async event(delivery: SlackDelivery): Promise<void> {
    let json: unknown;
    try {
      json = JSON.parse(delivery.body);
    } catch {
      json = null;
    }
    const parsed = EventPayload.safeParse(json);
    if (!parsed.success) return;
    const { team_id: teamId, event } = parsed.data;
    // The bot's own messages, edits, joins and other subtypes are not prompts.
    if (event.bot_id || event.subtype || !event.user || !event.channel || !event.ts) return;
    if (event.type !== "app_mention" && event.type !== "message") return;
    const workspace = await this.deps.store.getWorkspace(teamId);
    const thread = event.thread_ts ? await this.deps.store.threadByTs(teamId, event.channel, event.thread_ts) : null;
    if (!workspace) {
      if (event.type === "app_mention") await this.ephemeral(event.channel, event.user, UNBOUND_TEAM_TEXT);
      return;
    }
    const text = stripMentions(event.text ?? "");
    if (thread) {
      await this.promptInThread(workspace, thread, { userId: event.user, channelId: event.channel, ts: event.ts, text });
      return;
    }
    // A plain message outside a session's thread is not ours; a mention starts a session in its own thread.
    if (event.type !== "app_mention") return;
    // In a thread that has no session yet, the session takes that thread (Slack threads replies under the parent's ts).
    await this.runText(workspace, { userId: event.user, channelId: event.channel, text, startKey: `message:${event.channel}:${event.ts}`, underTs: event.thread_ts ?? event.ts });
  }

  private async promptInThread(workspace: SlackWorkspace, thread: SlackThread, input: { userId: string; channelId: string; ts: string; text: string }): Promise<void> {
    if (!input.text.trim()) return;
    const principal = slackPrincipal(workspace.orgId, workspace.teamId, input.userId);
    // No claim before the prompt: the key makes the prompt itself the claim, so a crash anywhere
    // (before or after it is stored) and the redelivery that follows end with exactly one prompt.
    const answer = await this.api.call(principal, "CreatePrompt", {
      path: `/v1/sessions/${thread.sessionId}/prompts`,
      params: { id: thread.sessionId },
      body: { content: input.text },
      headers: { "idempotency-key": slackPromptKey(input.channelId, input.ts) },
    });
    if (answer.status >= 500) throw new Error(`slack prompt: answered ${answer.status}`);
    if (answer.status === 202) return;
    const text = answer.status === 409 ? "This session has stopped: start a new one with the slash command." : refusal("send the prompt", answer);
    await this.outbox.post(`refused:${input.channelId}:${input.ts}`, { channel: thread.channelId, threadTs: thread.threadTs, text });
  }

  private async interaction(delivery: SlackDelivery): Promise<void> {
    let json: unknown;
    try {
      json = JSON.parse(new URLSearchParams(delivery.body).get("payload") ?? "");
    } catch {
      json = null;
    }
    const parsed = InteractionPayload.safeParse(json);
    if (!parsed.success || parsed.data.type !== "block_actions") return;
    const { team, user, channel, actions } = parsed.data;
    const workspace = await this.deps.store.getWorkspace(team.id);
    if (!workspace) {
      if (channel) await this.ephemeral(channel.id, user.id, UNBOUND_TEAM_TEXT);
      return;
    }
    const principal = slackPrincipal(workspace.orgId, team.id, user.id);
    for (const action of actions) {
      const sessionId = action.value ?? "";
      const thread = await this.deps.store.threadBySession(sessionId);
      if (!thread || thread.teamId !== team.id) continue;
      const route = { stop: { id: "StopSession", path: `/v1/sessions/${sessionId}` }, pause: { id: "PauseSession", path: `/v1/sessions/${sessionId}/pause` }, resume: { id: "ResumeSession", path: `/v1/sessions/${sessionId}/resume` } }[
        action.action_id as "stop" | "pause" | "resume"
      ];
      if (!route) continue;
      const answer = await this.api.call(principal, route.id, { path: route.path, params: { id: sessionId } });
      if (answer.status >= 500) throw new Error(`slack ${action.action_id}: answered ${answer.status}`);
      const text = answer.status < 300 ? `${action.action_id}: requested` : refusal(action.action_id, answer);
      await this.ephemeral(thread.channelId, user.id, text);
    }
  }
}

/** The Idempotency-Key of a thread message's prompt: a message is one prompt however often it arrives. */
export function slackPromptKey(channelId: string, ts: string): string {
  return `slack:${channelId}:${ts}`;
}

function titleOf(prompt: string): string {
  const line = prompt.split("\n")[0]?.trim() ?? "";
  return (line.length > 80 ? `${line.slice(0, 79)}…` : line) || "Slack session";
}

/** `<@U123>` mentions out of a message's text. */
export function stripMentions(text: string): string {
  return text.replace(/<@[A-Z0-9]+(?:\|[^>]*)?>/g, "").trim();
}

function refusal(what: string, answer: ApiAnswer): string {
  if (isBudgetExhausted(answer)) return `Could not ${what}: the budget is exhausted (${answer.message ?? answer.code ?? answer.status}). Nothing was started; ask an admin to add credits or raise the limit.`;
  return `Could not ${what}: ${answer.message ?? `error ${answer.status}`}. Nothing was started.`;
}

