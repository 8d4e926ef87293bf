/**
 * Statuses the flows' Lambdas broadcast reach Slack (issue 17; functions/slack/status-forward.ts):
 * the flow steps' push sends each `status` / `error` frame to the Slack queue as one SQS
 * SendMessage (asserted at the SDK surface), the broadcast waits for it, other frames send
 * nothing, and a failed send never fails the step. The worker (against dynalite and the local
 * Slack Web API stand-in) posts a forwarded pause and failure in the session's thread once: a
 * redelivery of the same message posts nothing, and a non-Slack session gets nothing.
 */
import { SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { mockClient } from "aws-sdk-client-mock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SqsSlackQueue } from "../../functions/composition/slack-aws";
import { composeSlackStore, slackWebClient } from "../../functions/composition/slack";
import type { HttpDeps } from "../../functions/http/http-handler";
import { createLogger } from "../../functions/observability/logger";
import type { SlackDelivery, SlackStore } from "../../functions/ports/slack";
import type { ConnectionRegistry } from "../../functions/ports/session-items";
import { broadcast, broadcastStatus } from "../../functions/services/broadcast";
import { slackForwardingPush, slackStatusDelivery } from "../../functions/slack/status-forward";
import { SlackWorker } from "../../functions/slack/worker";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";
import { RecordingPush } from "../support/recording-push";
import { startSlackWebApi, type SlackWebApiStandIn } from "../support/slack-web-api";

const QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/slack-deliveries";
const logger = createLogger("slack-status-forward-test");
const NOW = new Date("2026-11-25T10:00:00.000Z");
const noConnections: ConnectionRegistry = { list: () => Promise.resolve([]), remove: () => Promise.resolve() } as unknown as ConnectionRegistry;

describe("flow statuses forwarded to the Slack queue (SQS)", () => {
  const sqs = mockClient(SQSClient);
  afterEach(() => sqs.reset());
  afterAll(() => sqs.restore());

  const deps = () => ({ connections: noConnections, push: slackForwardingPush(new RecordingPush(), new SqsSlackQueue(QUEUE_URL), { logger, now: () => NOW }), logger, now: () => NOW });

  it("a status frame is one SendMessage with the session and the frame, sent before the broadcast resolves", async () => {
    let release!: () => void;
    sqs.on(SendMessageCommand).callsFake(() => new Promise((resolve) => (release = () => resolve({ MessageId: "m-1" }))));
    let done = false;
    const sent = broadcastStatus(deps(), "ses_a", "paused", "idle").then(() => (done = true));
    await expect.poll(() => sqs.commandCalls(SendMessageCommand).length).toBe(1);
    expect(done).toBe(false);
    release();
    await sent;
    const input = sqs.commandCalls(SendMessageCommand)[0]?.args[0].input ?? { QueueUrl: undefined, MessageBody: undefined };
    expect(input.QueueUrl).toBe(QUEUE_URL);
    const delivery = JSON.parse(input.MessageBody ?? "") as SlackDelivery;
    expect(delivery).toEqual({ kind: "status", key: expect.stringMatching(/^status:ses_a:[0-9a-f-]{36}$/) as unknown, body: JSON.stringify({ sessionId: "ses_a", message: { type: "status", status: "paused", message: "idle" } }), receivedAt: NOW.toISOString() });
    expect(Object.keys(input).sort()).toEqual(["MessageBody", "QueueUrl"]);
  });

  it("a flow's error frame is forwarded; agent events and presence frames send nothing", async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: "m" });
    await broadcast(deps(), "ses_b", { type: "message.part.text", text: "hi" });
    await broadcast(deps(), "ses_b", { type: "user.joined", userId: "u" });
    expect(sqs.commandCalls(SendMessageCommand)).toHaveLength(0);
    await broadcast(deps(), "ses_b", { type: "error", code: "pause_failed", message: "pause failed: boom" });
    const sent = JSON.parse(sqs.commandCalls(SendMessageCommand)[0]?.args[0].input.MessageBody ?? "") as SlackDelivery;
    const body = JSON.parse(sent.body) as unknown;
    expect(body).toEqual({ sessionId: "ses_b", message: { type: "error", code: "pause_failed", message: "pause failed: boom" } });
  });

  it("a failed send is logged and never fails the broadcast (nor the step)", async () => {
    sqs.on(SendMessageCommand).rejects(new Error("AccessDenied"));
    await expect(broadcastStatus(deps(), "ses_c", "error", "boom")).resolves.toBe(0);
    expect(sqs.commandCalls(SendMessageCommand)).toHaveLength(1);
  });
});

describe("the Slack worker posts forwarded statuses", () => {
  let table: TestTable;
  let store: SlackStore;
  let sessions: DynamoSessionStore;
  let slack: SlackWebApiStandIn;
  let worker: SlackWorker;

  beforeAll(async () => {
    table = await startTestTable();
    store = composeSlackStore(table.doc, table.tableName);
    sessions = new DynamoSessionStore(table.doc, table.tableName);
    slack = await startSlackWebApi();
    const web = slackWebClient({ botToken: "xoxb-test", apiUrl: slack.url, logger, retries: 1 });
    worker = new SlackWorker({ http: { sessions } as unknown as HttpDeps, store, web, logger, now: () => new Date() });
  });
  afterAll(async () => {
    await slack.close();
    await table.close();
  });

  async function slackSession(channel: string, threadTs: string): Promise<string> {
    const session = buildSession({ clientType: "slack" });
    await sessions.createSession(session);
    await store.putThread({ sessionId: session.id, teamId: "T1", channelId: channel, threadTs, userId: "U1" }, new Date());
    await worker.outbox.post(`status:${session.id}`, { channel, threadTs, text: "Status: creating" });
    return session.id;
  }
  const threadPosts = (threadTs: string) => slack.callsOf("chat.postMessage").filter((c) => c.args.thread_ts === threadTs);

  it("a pause is posted in the thread with what to do next, and the status line updated; a redelivery posts nothing", async () => {
    const sessionId = await slackSession("C1", "100.1");
    const delivery = slackStatusDelivery(sessionId, { type: "status", status: "paused" }, new Date());
    await worker.handle(delivery);
    expect(threadPosts("100.1").map((c) => c.args.text)).toEqual(["Status: creating", "Paused to save resources. Reply in this thread to wake it."]);
    const statusTs = slack.messages.find((m) => m.channel === "C1" && m.text.startsWith("Status:"))?.ts;
    expect(slack.callsOf("chat.update").filter((c) => c.args.ts === statusTs).map((c) => c.args.text)).toEqual(["Status: paused (reply in this thread to wake it)"]);
    const before = slack.calls.length;
    await worker.handle(delivery);
    expect(threadPosts("100.1")).toHaveLength(2);
    expect(slack.calls).toHaveLength(before);
  });

  it("a failure (an error status, a flow's error frame) is posted once each, with what to do next", async () => {
    const sessionId = await slackSession("C2", "200.1");
    const failed = slackStatusDelivery(sessionId, { type: "status", status: "error", message: "the sandbox could not start" }, new Date());
    const flowError = slackStatusDelivery(sessionId, { type: "error", code: "resume_failed", message: "resume failed: provider quota" }, new Date());
    for (const d of [failed, flowError, failed, flowError]) await worker.handle(d);
    expect(threadPosts("200.1").map((c) => c.args.text)).toEqual([
      "Status: creating",
      "The session failed: the sandbox could not start. Reply in this thread to try again.",
      "resume failed: provider quota. Reply in this thread to try again, or use the buttons on the status line.",
    ]);
  });

  it("a session that is not a Slack session gets nothing", async () => {
    const session = buildSession({ clientType: "web" });
    await sessions.createSession(session);
    const before = slack.calls.length;
    await worker.handle(slackStatusDelivery(session.id, { type: "status", status: "paused" }, new Date()));
    await worker.handle({ kind: "status", key: "status:x:y", body: "not json", receivedAt: new Date().toISOString() });
    expect(slack.calls).toHaveLength(before);
  });
});
