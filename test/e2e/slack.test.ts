/**
 * Slack end to end (issue 17, API.md "Slack") on the local runtime: real sockets, the real local
 * provider with real OpenCode and the development model (a turn answers `echo: <prompt>`), and a
 * local HTTP server speaking Slack's Web API (SLACK_API_URL) whose calls are asserted exactly.
 * Requests are signed with Slack's v0 scheme as Slack signs them.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { gitOrigin, type GitOrigin } from "../support/git-origin";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { slackSignature, startSlackWebApi, type SlackWebApiStandIn } from "../support/slack-web-api";

const SECRET = "e2e-signing-secret-0123456789abcdef";
const BOT_TOKEN = "xoxb-e2e-bot-token";
const TEAM = "T0E2E";
const CHANNEL = "C0E2E";
const USER = "U0ALICE";

let runtime: LocalRuntime;
let api: ApiClient;
let slack: SlackWebApiStandIn;
let origin: GitOrigin;
let triggers = 0;

beforeAll(async () => {
  slack = await startSlackWebApi();
  origin = gitOrigin("slack-e2e-");
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: {
      RELAY_SCAN_INTERVAL_SECONDS: "0.2",
      SLACK_SIGNING_SECRET: SECRET,
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_API_URL: slack.url,
      // One open session per org: the second start in the org is `429 quota_exceeded` (a budget answer).
      ORG_MAX_OPEN_SESSIONS: "1",
    },
  }));
  const bound = await api.request("PUT", "/v1/slack/workspace", { body: { teamId: TEAM } });
  expect(bound.status, bound.text).toBe(200);
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime), "\nslack calls:", JSON.stringify(slack.calls, null, 1).slice(-6000));
});
afterAll(async () => {
  await runtime?.close();
  await slack?.close();
});

function signedHeaders(body: string, extra: Record<string, string> = {}): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000));
  return { "x-slack-request-timestamp": ts, "x-slack-signature": slackSignature(SECRET, ts, body), ...extra };
}

function commandBody(text: string, options: { team?: string; trigger?: string } = {}): string {
  return new URLSearchParams({
    team_id: options.team ?? TEAM,
    user_id: USER,
    channel_id: CHANNEL,
    command: "/agent",
    text,
    response_url: "https://hooks.slack.com/commands/x",
    trigger_id: options.trigger ?? `trig-${++triggers}`,
  }).toString();
}

function postForm(path: string, body: string, extra: Record<string, string> = {}) {
  return api.request("POST", path, { token: null, rawBody: body, headers: { "content-type": "application/x-www-form-urlencoded", ...signedHeaders(body, extra) } });
}

function postEvent(event: Record<string, unknown>, eventId: string, extra: Record<string, string> = {}) {
  const body = JSON.stringify({ type: "event_callback", team_id: TEAM, api_app_id: "A1", event_id: eventId, event_time: 1, event });
  return api.request("POST", "/slack/events", { token: null, rawBody: body, headers: { "content-type": "application/json", ...signedHeaders(body, extra) } });
}

async function slackSessions(): Promise<{ id: string; clientType: string; status: string }[]> {
  const res = await api.request("GET", "/v1/sessions?limit=100");
  return ((res.body as { items: { id: string; clientType: string; status: string }[] }).items ?? []).filter((s) => s.clientType === "slack");
}

const threadPosts = (threadTs: string) => slack.callsOf("chat.postMessage").filter((c) => c.args.thread_ts === threadTs);

let sessionId = "";
let threadTs = "";
let firstCommand = "";

describe("Slack: one thread per session", () => {
  it("a signed command creates one session and one thread whose reply holds the agent's answer; a duplicate and a 429 post nothing twice", async () => {
    // Slack rate-limits the first post: the client waits out Retry-After and sends it once more.
    slack.rateLimitNext("chat.postMessage", 1);
    const body = commandBody(`${origin.url} say hello from slack`);
    firstCommand = body;
    const first = await postForm("/slack/commands", body);
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ response_type: "ephemeral", text: "Working on it…" });
    const duplicate = await postForm("/slack/commands", body);
    expect(duplicate.status).toBe(200);
    await runtime.slack.settled();

    const sessions = await slackSessions();
    expect(sessions).toHaveLength(1);
    sessionId = sessions[0]?.id ?? "";
    const stored = await storedSession(runtime, sessionId);
    expect(stored).toMatchObject({ clientType: "slack", userId: `slack:${TEAM}:${USER}`, orgId: "dev-org", initialPrompt: "say hello from slack" });
    expect(stored.repos.map((r) => r.url)).toEqual([origin.url]);

    // The parent: one post (after one rate-limited attempt), with the bot token, saying what was asked on which repo.
    const parents = slack.callsOf("chat.postMessage", { includeRateLimited: true }).filter((c) => c.args.thread_ts === undefined);
    expect(parents.map((c) => c.rateLimited)).toEqual([true, false]);
    expect(parents[1]?.args).toMatchObject({ channel: CHANNEL, text: `<@${USER}> asked on ${origin.url}:\n>say hello from slack`, metadata: { event_type: "scp_outbox", event_payload: { key: `parent:${sessionId}` } } });
    expect(parents.every((c) => c.token === BOT_TOKEN)).toBe(true);
    threadTs = slack.messages.find((m) => !m.thread_ts)?.ts ?? "";
    expect(threadTs).not.toBe("");

    // The agent's answer, posted in the thread once.
    const answer = await waitFor("the agent's answer in the thread", () => threadPosts(threadTs).find((c) => c.args.text === "echo: say hello from slack"), 100_000);
    expect(answer.args.channel).toBe(CHANNEL);
    await runtime.slack.settled();
    expect(threadPosts(threadTs).filter((c) => c.args.text === "echo: say hello from slack")).toHaveLength(1);
    // The status line: posted once in the thread with its buttons, then edited in place.
    const statusPosts = threadPosts(threadTs).filter((c) => String(c.args.text).startsWith("Status:"));
    expect(statusPosts).toHaveLength(1);
    const statusTs = slack.messages.find((m) => m.thread_ts === threadTs && m.text.startsWith("Status:"))?.ts;
    const updates = slack.callsOf("chat.update").filter((c) => c.args.ts === statusTs);
    expect(updates.length).toBeGreaterThan(0);
    expect(updates.map((c) => c.args.text)).toContain("Status: running");
    // The ack's ephemeral answer was the only one: no error messages.
    expect(slack.callsOf("chat.postEphemeral")).toEqual([]);
  }, 150_000);

  it("a thread reply prompts the same session, woken from paused; its app_mention twin and Slack's retry add nothing; the bot's own messages are ignored", async () => {
    expect(sessionId).not.toBe("");
    const paused = await api.request("POST", `/v1/sessions/${sessionId}/pause`);
    expect(paused.status, paused.text).toBe(202);
    await waitFor("the session paused", async () => (await storedSession(runtime, sessionId)).status === "paused");

    const message = { type: "message", channel: CHANNEL, user: USER, text: `<@UBOT> second question`, ts: "1800000000.000100", thread_ts: threadTs };
    expect((await postEvent(message, "Ev-msg-1")).status).toBe(200);
    expect((await postEvent(message, "Ev-msg-1", { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout" })).status).toBe(200);
    expect((await postEvent({ ...message, type: "app_mention" }, "Ev-mention-1")).status).toBe(200);
    // What the bot posted comes back as events too: never a prompt.
    expect((await postEvent({ type: "message", channel: CHANNEL, bot_id: "B1", text: "echo: say hello from slack", ts: "1800000000.000200", thread_ts: threadTs }, "Ev-bot-1")).status).toBe(200);
    await runtime.slack.settled();

    await waitFor("the second answer in the thread", () => threadPosts(threadTs).find((c) => c.args.text === "echo: second question"), 100_000);
    expect((await slackSessions()).map((s) => s.id)).toEqual([sessionId]);
    const prompts = await runtime.deps.prompts.list(sessionId);
    expect(prompts.map((p) => [p.content, p.source])).toEqual([
      ["say hello from slack", `user:slack:${TEAM}:${USER}`],
      ["second question", `user:slack:${TEAM}:${USER}`],
    ]);
  }, 150_000);

  it("the status line's buttons pause and resume the session through /slack/interactions; the pause is posted in the thread", async () => {
    expect(sessionId).not.toBe("");
    await waitFor("the session running again", async () => (await storedSession(runtime, sessionId)).status === "running");
    const click = (action: string, trigger: string) => {
      const payload = JSON.stringify({ type: "block_actions", trigger_id: trigger, team: { id: TEAM }, user: { id: USER }, channel: { id: CHANNEL }, actions: [{ action_id: action, value: sessionId, action_ts: "1.2" }] });
      return postForm("/slack/interactions", new URLSearchParams({ payload }).toString());
    };
    expect((await click("pause", "trig-pause")).status).toBe(200);
    expect((await click("pause", "trig-pause")).status).toBe(200); // Slack's retry of the same click
    await runtime.slack.settled();
    await waitFor("the session paused by the button", async () => (await storedSession(runtime, sessionId)).status === "paused");
    await waitFor("the pause posted in the thread", () => threadPosts(threadTs).find((c) => String(c.args.text).startsWith("Paused to save resources")), 30_000);
    const byButton = async () => ((await api.request("GET", `/v1/sessions/${sessionId}/events?limit=100`)).body as { items: { flow: string; actor: string }[] }).items.filter((e) => e.flow === "pause" && e.actor === `user:slack:${TEAM}:${USER}`);
    await waitFor("the pause flow's event, started by the Slack user", async () => (await byButton()).length > 0, 30_000);
    expect(await byButton()).toHaveLength(1);
    expect(slack.callsOf("chat.postEphemeral").map((c) => c.args)).toEqual([{ channel: CHANNEL, user: USER, text: "pause: requested" }]);

    expect((await click("resume", "trig-resume")).status).toBe(200);
    await runtime.slack.settled();
    await waitFor("the session resumed by the button", async () => (await storedSession(runtime, sessionId)).status === "running");

    // SQS redelivers the first command to the worker (a crash after the start): nothing new is created or posted.
    const postsBefore = slack.callsOf("chat.postMessage").length;
    const ephemeralsBefore = slack.callsOf("chat.postEphemeral").length;
    await runtime.slack.worker.handle({ kind: "command", key: `command:${new URLSearchParams(firstCommand).get("trigger_id") ?? ""}`, body: firstCommand, receivedAt: new Date().toISOString() });
    expect((await slackSessions()).map((s) => s.id)).toEqual([sessionId]);
    expect(slack.callsOf("chat.postMessage").slice(postsBefore).filter((c) => c.args.thread_ts === undefined || !String(c.args.text).startsWith("Paused"))).toEqual([]);
    expect(slack.callsOf("chat.postEphemeral")).toHaveLength(ephemeralsBefore);
    expect((await runtime.deps.prompts.list(sessionId)).length).toBe(2);
    expect((await storedSession(runtime, sessionId)).status).toBe("running");
    slack.calls.splice(0, slack.calls.length);
  }, 120_000);

  it("unbound teams, bad signatures, empty prompts and an exhausted budget create nothing and say why", async () => {
    const before = (await slackSessions()).length;
    // Another org's Slack team nobody bound.
    expect((await postForm("/slack/commands", commandBody(`${origin.url} hi`, { team: "T0NOBODY" }))).status).toBe(200);
    // A bad signature and a stale timestamp: 401 before anything happens.
    const body = commandBody(`${origin.url} hi`);
    const forged = await api.request("POST", "/slack/commands", { token: null, rawBody: body, headers: { "content-type": "application/x-www-form-urlencoded", ...signedHeaders(`${body}x`) } });
    expect(forged.status).toBe(401);
    const stale = String(Math.floor(Date.now() / 1000) - 301);
    const old = await api.request("POST", "/slack/commands", { token: null, rawBody: body, headers: { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": stale, "x-slack-signature": slackSignature(SECRET, stale, body) } });
    expect(old.status).toBe(401);
    // A repository without a prompt; no repository at all.
    expect((await postForm("/slack/commands", commandBody(origin.url))).status).toBe(200);
    expect((await postForm("/slack/commands", commandBody("do something"))).status).toBe(200);
    // The org already has its one open session: the create is refused (429), nothing is created.
    expect((await postForm("/slack/commands", commandBody(`${origin.url} a second session`))).status).toBe(200);
    await runtime.slack.settled();
    // A mention starts a session like the command: refused the same way here.
    expect((await postEvent({ type: "app_mention", channel: CHANNEL, user: USER, text: `<@UBOT> ${origin.url} a mentioned session`, ts: "1800000001.000100" }, "Ev-mention-start")).status).toBe(200);
    await runtime.slack.settled();

    expect((await slackSessions()).length).toBe(before);
    const ephemerals = slack.callsOf("chat.postEphemeral").map((c) => c.args);
    expect(ephemerals).toHaveLength(5);
    expect(ephemerals.every((a) => a.channel === CHANNEL && a.user === USER)).toBe(true);
    expect(String(ephemerals[0]?.text)).toContain("not connected to an org");
    expect(String(ephemerals[1]?.text)).toContain("no prompt");
    expect(String(ephemerals[2]?.text)).toContain("No repository");
    expect(String(ephemerals[3]?.text)).toContain("budget is exhausted");
    expect(String(ephemerals[4]?.text)).toContain("budget is exhausted");
    // Nothing was posted for them: no thread parent besides the first session's.
    expect(slack.callsOf("chat.postMessage").filter((c) => c.args.thread_ts === undefined || c.args.thread_ts === "1800000001.000100")).toEqual([]);
  }, 60_000);
});
