/**
 * The Slack outbox against dynalite and a local Slack Web API server: one post per key, a 429's
 * Retry-After waited out by `@slack/web-api`, and a send that reached Slack before a crash (the
 * item says sending, no ts) found by its metadata instead of posted again. The status line's
 * throttle: at most one `chat.update` per interval, the latest text last.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeSlackStore, slackWebClient } from "../../functions/composition/slack";
import type { SlackStore } from "../../functions/ports/slack";
import { SlackOutbox } from "../../functions/slack/outbox";
import { SlackProgress } from "../../functions/slack/status-line";
import { createLogger } from "../../functions/observability/logger";
import { startTestTable, type TestTable } from "../support/dynalite";
import { startSlackWebApi, type SlackWebApiStandIn } from "../support/slack-web-api";
import { waitFor } from "../support/wait-for";

let table: TestTable;
let store: SlackStore;
let slack: SlackWebApiStandIn;
let outbox: SlackOutbox;
const logger = createLogger("slack-outbox-test");

beforeAll(async () => {
  table = await startTestTable();
  store = composeSlackStore(table.doc, table.tableName);
  slack = await startSlackWebApi();
  outbox = new SlackOutbox(slackWebClient({ botToken: "xoxb-test", apiUrl: slack.url, logger, retries: 2 }), store, () => new Date());
});
afterAll(async () => {
  await slack.close();
  await table.close();
});

describe("Slack outbox", () => {
  it("posts once per key, with the key in the message metadata", async () => {
    const ts = await outbox.post("k-once", { channel: "C1", threadTs: "1.0", text: "hello" });
    expect(await outbox.post("k-once", { channel: "C1", threadTs: "1.0", text: "hello" })).toBe(ts);
    expect(slack.callsOf("chat.postMessage").filter((c) => c.args.text === "hello")).toEqual([
      { method: "chat.postMessage", token: "xoxb-test", rateLimited: false, args: { channel: "C1", thread_ts: "1.0", text: "hello", metadata: { event_type: "scp_outbox", event_payload: { key: "k-once" } } } },
    ]);
    expect((await store.getPost("k-once"))?.ts).toBe(ts);
  });

  it("a 429 is retried after its Retry-After, and posted once", async () => {
    slack.rateLimitNext("chat.postMessage", 1);
    await outbox.post("k-429", { channel: "C1", text: "limited" });
    expect(slack.callsOf("chat.postMessage", { includeRateLimited: true }).filter((c) => c.args.text === "limited").map((c) => c.rateLimited)).toEqual([true, false]);
  });

  it("a crash between sending and recording never posts twice: the message is found by its key", async () => {
    // The first worker began the post and Slack has it, but the worker died before recording the ts.
    await store.beginPost("k-crash", "C2", new Date());
    const sent = await slackWebClient({ botToken: "xoxb-test", apiUrl: slack.url, logger }).chat.postMessage({ channel: "C2", thread_ts: "9.0", text: "crashed", metadata: { event_type: "scp_outbox", event_payload: { key: "k-crash" } } });
    const before = slack.callsOf("chat.postMessage").length;
    expect(await outbox.post("k-crash", { channel: "C2", threadTs: "9.0", text: "crashed" })).toBe(sent.ts);
    expect(slack.callsOf("chat.postMessage")).toHaveLength(before);
    expect(slack.callsOf("conversations.replies").at(-1)?.args).toMatchObject({ channel: "C2", ts: "9.0", include_all_metadata: "true" });
    expect((await store.getPost("k-crash"))?.ts).toBe(sent.ts);
  });

  it("a send that began but never reached Slack is sent", async () => {
    await store.beginPost("k-lost", "C3", new Date());
    await outbox.post("k-lost", { channel: "C3", text: "lost before sending" });
    expect(slack.callsOf("conversations.history").at(-1)?.args).toMatchObject({ channel: "C3" });
    expect(slack.callsOf("chat.postMessage").filter((c) => c.args.text === "lost before sending")).toHaveLength(1);
  });

  it("the status line is updated at most once per interval, ending on the latest state", async () => {
    let now = 1_000_000;
    await store.putThread({ sessionId: "ses_status", teamId: "T1", channelId: "C9", threadTs: "5.0", userId: "U1" }, new Date());
    await outbox.post("status:ses_status", { channel: "C9", threadTs: "5.0", text: "Status: creating" });
    const progress = new SlackProgress({
      store,
      sessions: { getSession: () => Promise.resolve({ clientType: "slack" } as never) },
      outbox,
      logger,
      now: () => new Date(now),
      minUpdateMs: 60_000,
    });
    const statusTs = slack.messages.find((m) => m.channel === "C9")?.ts;
    const updates = () => slack.callsOf("chat.update").filter((c) => c.args.ts === statusTs).map((c) => c.args.text);
    progress.observe("ses_status", { type: "status", status: "running" });
    for (const tool of ["bash", "read", "edit"]) progress.observe("ses_status", { type: "message.part.tool-update", tool });
    await progress.settled();
    // The first change at once; the three within the interval wait for it.
    expect(updates()).toEqual(["Status: running"]);
    now += 60_000;
    progress.observe("ses_status", { type: "message.create", messageId: "m1" });
    await progress.settled();
    // Still inside the timer's wait (the clock is ours, the timer is real): nothing more yet.
    expect(updates()).toEqual(["Status: running"]);
    progress.close();
    // A second tap with a short interval flushes the latest state once its interval has passed.
    const quick = new SlackProgress({ store, sessions: { getSession: () => Promise.resolve({ clientType: "slack" } as never) }, outbox, logger, now: () => new Date(), minUpdateMs: 50 });
    quick.observe("ses_status", { type: "status", status: "paused" });
    quick.observe("ses_status", { type: "message.part.tool-update", tool: "grep" });
    quick.observe("ses_status", { type: "status", status: "running" });
    await waitFor(() => updates().at(-1) === "Status: running" && updates().length === 3, { message: () => `updates: ${JSON.stringify(updates())}` });
    await quick.settled();
    expect(updates()).toEqual(["Status: running", "Status: paused (reply in this thread to wake it)", "Status: running"]);
    quick.close();
  });
});
