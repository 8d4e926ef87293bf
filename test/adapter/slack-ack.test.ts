/**
 * The Slack ack function (API.md "Slack") against dynalite: signature checks (valid, bad, missing,
 * stale, replayed under another body) and the delivery dedupe (Slack retries, repeated event_id /
 * trigger_id), with a recording queue. A refused request stores and enqueues nothing.
 */
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { composeSlackStore } from "../../functions/composition/slack";
import type { SlackDelivery, SlackStore } from "../../functions/ports/slack";
import { makeSlackAckHandler, type SlackRoute } from "../../functions/slack/ack";
import { slackSignature } from "../../functions/slack/signature";
import { GetCommand, ScanCommand } from "../../functions/store/dynamodb-sdk";
import { startTestTable, type TestTable } from "../support/dynalite";

const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW = new Date("2026-11-25T01:00:00Z");
const NOW_S = Math.floor(NOW.getTime() / 1000);

let table: TestTable;
let store: SlackStore;
let enqueued: SlackDelivery[];
let failEnqueue: boolean;

beforeAll(async () => {
  table = await startTestTable();
  store = composeSlackStore(table.doc, table.tableName);
});
afterAll(() => table.close());
beforeEach(() => {
  enqueued = [];
  failEnqueue = false;
});

function handler(route: SlackRoute) {
  return makeSlackAckHandler(route, {
    signingSecret: () => Promise.resolve(SECRET),
    store,
    queue: {
      enqueue: (d) => {
        if (failEnqueue) return Promise.reject(new Error("queue down"));
        enqueued.push(d);
        return Promise.resolve();
      },
    },
    now: () => NOW,
    log: () => undefined,
  });
}

function event(body: string, headers: Record<string, string>): APIGatewayProxyEventV2 {
  return { version: "2.0", routeKey: "POST /slack/x", rawPath: "/slack/x", rawQueryString: "", headers, body, isBase64Encoded: false, requestContext: {} as APIGatewayProxyEventV2["requestContext"] };
}

function signed(body: string, ts = NOW_S, extra: Record<string, string> = {}): APIGatewayProxyEventV2 {
  return event(body, { "x-slack-request-timestamp": String(ts), "x-slack-signature": slackSignature(SECRET, String(ts), body), ...extra });
}

const commandBody = (trigger: string, text = "acme/app fix the tests") =>
  new URLSearchParams({ team_id: "T0001", user_id: "U0001", channel_id: "C0001", command: "/agent", text, trigger_id: trigger, response_url: "https://hooks.slack.com/x" }).toString();
const eventBody = (eventId: string) => JSON.stringify({ type: "event_callback", team_id: "T0001", event_id: eventId, event: { type: "app_mention", user: "U1", text: "<@UBOT> hi", channel: "C1", ts: "1.1" } });

async function deliveryItems(): Promise<number> {
  const out = await table.doc.send(new ScanCommand({ TableName: table.tableName }));
  return (out.Items ?? []).filter((i) => String(i.PK).startsWith("SLACKDELIVERY#")).length;
}

describe("Slack ack: signatures", () => {
  it("a signed slash command is recorded, enqueued once and answered with an ephemeral message", async () => {
    const before = await deliveryItems();
    const res = await handler("commands")(signed(commandBody("trig-1")));
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body ?? "")).toEqual({ response_type: "ephemeral", text: "Working on it…" });
    expect(enqueued).toEqual([{ kind: "command", key: "command:trig-1", body: commandBody("trig-1"), receivedAt: NOW.toISOString() }]);
    expect(await deliveryItems()).toBe(before + 1);
    const item = await table.doc.send(new GetCommand({ TableName: table.tableName, Key: { PK: "SLACKDELIVERY#command:trig-1", SK: "SLACKDELIVERY" } }));
    expect(item.Item?.ttl).toBe(NOW_S + 86_400);
  });

  it.each([
    ["a wrong signature", (b: string) => event(b, { "x-slack-request-timestamp": String(NOW_S), "x-slack-signature": slackSignature("another-secret", String(NOW_S), b) })],
    ["no signature", (b: string) => event(b, { "x-slack-request-timestamp": String(NOW_S) })],
    ["no timestamp", (b: string) => event(b, { "x-slack-signature": slackSignature(SECRET, String(NOW_S), b) })],
    ["a timestamp 301 s old", (b: string) => signed(b, NOW_S - 301)],
    ["a timestamp 301 s ahead", (b: string) => signed(b, NOW_S + 301)],
    ["a signature replayed over another body", (b: string) => event(b, { "x-slack-request-timestamp": String(NOW_S), "x-slack-signature": slackSignature(SECRET, String(NOW_S), commandBody("other")) })],
  ])("%s is 401 and nothing is stored or enqueued", async (_name, make) => {
    const before = await deliveryItems();
    for (const route of ["commands", "events", "interactions"] as const) {
      const body = route === "events" ? eventBody(`Ev-refused-${route}`) : commandBody(`trig-refused-${route}`);
      const res = await handler(route)(make(body));
      expect(res.statusCode).toBe(401);
      expect(JSON.parse(res.body ?? "").error.code).toBe("unauthorized");
    }
    expect(enqueued).toEqual([]);
    expect(await deliveryItems()).toBe(before);
  });

  it("a timestamp 300 s off is still inside the window", async () => {
    expect((await handler("commands")(signed(commandBody("trig-edge"), NOW_S - 300))).statusCode).toBe(200);
    expect(enqueued).toHaveLength(1);
  });

  it("url_verification answers the challenge (signed) and stores nothing", async () => {
    const before = await deliveryItems();
    const body = JSON.stringify({ type: "url_verification", challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", token: "x" });
    const res = await handler("events")(signed(body));
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body ?? "")).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    expect((await handler("events")(event(body, {}))).statusCode).toBe(401);
    expect(enqueued).toEqual([]);
    expect(await deliveryItems()).toBe(before);
  });

  it("other envelopes (app_rate_limited) are acknowledged and store nothing; an event_callback without event_id is 400", async () => {
    const before = await deliveryItems();
    const limited = await handler("events")(signed(JSON.stringify({ type: "app_rate_limited", team_id: "T0001", minute_rate_limited: 1518467820, api_app_id: "A1" })));
    expect(limited.statusCode).toBe(200);
    const noId = await handler("events")(signed(JSON.stringify({ type: "event_callback", team_id: "T0001", event: { type: "message" } })));
    expect(noId.statusCode).toBe(400);
    expect(JSON.parse(noId.body ?? "").error.message).toContain("event_id");
    expect(enqueued).toEqual([]);
    expect(await deliveryItems()).toBe(before);
  });

  it("help (or an empty command) is answered by the ack itself: usage, nothing enqueued", async () => {
    for (const text of ["help", ""]) {
      const res = await handler("commands")(signed(commandBody(`trig-help-${text}`, text)));
      expect(res.statusCode).toBe(200);
      expect(JSON.parse(res.body ?? "").text).toContain("Usage");
    }
    expect(enqueued).toEqual([]);
  });
});

describe("Slack ack: redeliveries", () => {
  it("an event redelivered with X-Slack-Retry-Num (same event_id) is answered 200 and enqueued once", async () => {
    const body = eventBody("Ev-retry-1");
    expect((await handler("events")(signed(body))).statusCode).toBe(200);
    for (const n of ["1", "2", "3"]) {
      const res = await handler("events")(signed(body, NOW_S, { "x-slack-retry-num": n, "x-slack-retry-reason": "http_timeout" }));
      expect(res.statusCode).toBe(200);
    }
    expect(enqueued.map((d) => d.key)).toEqual(["event:Ev-retry-1"]);
  });

  it("a repeated trigger_id is enqueued once", async () => {
    await handler("commands")(signed(commandBody("trig-dup")));
    const again = await handler("commands")(signed(commandBody("trig-dup")));
    expect(again.statusCode).toBe(200);
    expect(enqueued.map((d) => d.key)).toEqual(["command:trig-dup"]);
  });

  it("a delivery that could not be enqueued is forgotten, so Slack's retry is taken", async () => {
    failEnqueue = true;
    const body = eventBody("Ev-queue-down");
    await expect(handler("events")(signed(body))).rejects.toThrow("queue down");
    failEnqueue = false;
    expect((await handler("events")(signed(body, NOW_S, { "x-slack-retry-num": "1" }))).statusCode).toBe(200);
    expect(enqueued.map((d) => d.key)).toEqual(["event:Ev-queue-down"]);
  });

  it("an interaction is keyed by its trigger_id", async () => {
    const payload = JSON.stringify({ type: "block_actions", trigger_id: "trig-int", team: { id: "T0001" }, user: { id: "U1" }, actions: [{ action_id: "pause", value: "ses_x" }] });
    const body = new URLSearchParams({ payload }).toString();
    await handler("interactions")(signed(body));
    await handler("interactions")(signed(body, NOW_S, { "x-slack-retry-num": "1" }));
    expect(enqueued.map((d) => d.key)).toEqual(["interaction:trig-int"]);
  });
});
