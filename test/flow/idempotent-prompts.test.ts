/**
 * Idempotent prompts (README "Idempotent prompts"): POST /v1/sessions/{id}/prompts with an
 * `Idempotency-Key` stores one prompt per (org, session, key), and the Slack worker's thread
 * messages (`Idempotency-Key: slack:<channel>:<ts>`) become exactly one stored and delivered
 * prompt under a worker killed or timed out at any point, SQS's redelivery, and twin events
 * (`message` + `app_mention` of one ts). Real route handlers, flows and stores over dynalite; the
 * Slack Web API is the local stand-in; the agent is scripted (it records what it was sent).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { makeCreatePromptHandler } from "../../functions/http/handlers/create-prompt";
import type { HttpDeps } from "../../functions/http/http-handler";
import type { PromptQueue } from "../../functions/ports/session-items";
import type { SlackDelivery } from "../../functions/ports/slack";
import { composeSlackStore, slackWebClient } from "../../functions/composition/slack";
import { SlackWorker } from "../../functions/slack/worker";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { startSlackWebApi, type SlackWebApiStandIn } from "../support/slack-web-api";
import { waitFor } from "../support/wait-for";

const TOKEN = "sbx_idempotent_prompts_token_0123456789";
const TEAM = "T0IDEM";
const CHANNEL = "C0IDEM";
const USER = "U0BOB";
const THREAD_TS = "1800000000.000001";

let h: FlowHarness;
let agent: ScriptedAgent;

beforeEach(async () => {
  agent = new ScriptedAgent();
  h = await startFlowHarness({ provider: new InstantSandboxProvider({ supportsPause: false }), agent });
  await new DynamoApiTokenStore(h.table.doc, h.table.tableName).putToken(TOKEN, { userId: "user-a", orgId: "org-a" }, new Date());
});
afterEach(async () => {
  await h.close();
});

/** The route deps, with the flows' relay-watch stand-in (no relay runs here: delivery proceeds as if one watched). */
const routeDeps = (): HttpDeps => ({ ...h.httpDeps, relayLeases: h.deps.relayLeases });

async function runningSession(): Promise<string> {
  const s = await h.createSession({ orgId: "org-a" });
  await h.run("ensure-runtime", s.id);
  expect((await h.session(s.id)).status).toBe("running");
  return s.id;
}

function promptEvent(sessionId: string, content: string, headers: Record<string, string>): APIGatewayProxyEventV2 {
  const path = `/v1/sessions/${sessionId}/prompts`;
  return {
    version: "2.0",
    routeKey: "POST /v1/sessions/{id}/prompts",
    rawPath: path,
    rawQueryString: "",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
    pathParameters: { id: sessionId },
    requestContext: { requestId: `req-${Math.random().toString(36).slice(2)}`, http: { method: "POST", path } },
    body: JSON.stringify({ content }),
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

async function postPrompt(sessionId: string, content: string, headers: Record<string, string> = {}): Promise<{ status: number; body: { prompt?: { id: string }; error?: { code: string; message: string } } }> {
  const res = await makeCreatePromptHandler(routeDeps())(promptEvent(sessionId, content, headers), buildLambdaContext("CreatePrompt", "req"));
  return { status: res.statusCode ?? 0, body: JSON.parse(String(res.body ?? "{}")) as never };
}

const sentToAgent = (text: string) => agent.prompts.filter((p) => p.text === text).length;

describe("POST /v1/sessions/{id}/prompts with Idempotency-Key", () => {
  it("the same key twice stores one prompt and answers the same id; the agent gets it once", async () => {
    const sessionId = await runningSession();
    const first = await postPrompt(sessionId, "build it", { "idempotency-key": "client-retry-1" });
    const second = await postPrompt(sessionId, "build it", { "idempotency-key": "client-retry-1" });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(second.status, JSON.stringify(second.body)).toBe(202);
    expect(second.body.prompt?.id).toBe(first.body.prompt?.id);
    const stored = await h.deps.prompts.list(sessionId);
    expect(stored.map((p) => [p.promptId, p.content])).toEqual([[first.body.prompt?.id, "build it"]]);
    expect(sentToAgent("build it")).toBe(1);
  });

  it("different keys (and no key) store separate prompts", async () => {
    const sessionId = await runningSession();
    const a = await postPrompt(sessionId, "same text", { "idempotency-key": "key-a" });
    const b = await postPrompt(sessionId, "same text", { "idempotency-key": "key-b" });
    const c = await postPrompt(sessionId, "same text");
    expect([a.status, b.status, c.status]).toEqual([202, 202, 202]);
    expect(new Set([a.body.prompt?.id, b.body.prompt?.id, c.body.prompt?.id]).size).toBe(3);
    expect((await h.deps.prompts.list(sessionId)).length).toBe(3);
  });

  it("the same key in another session is another prompt", async () => {
    const one = await runningSession();
    const two = await runningSession();
    const a = await postPrompt(one, "hello", { "idempotency-key": "shared-key" });
    const b = await postPrompt(two, "hello", { "idempotency-key": "shared-key" });
    expect(a.body.prompt?.id).not.toBe(b.body.prompt?.id);
    expect((await h.deps.prompts.list(one)).length).toBe(1);
    expect((await h.deps.prompts.list(two)).length).toBe(1);
  });

  it.each([
    ["empty", ""],
    ["with a space", "has space"],
    ["too long", "k".repeat(256)],
  ])("a key %s is a 400 naming the header, and nothing is stored", async (_name, key) => {
    const sessionId = await runningSession();
    const res = await postPrompt(sessionId, "never stored", { "idempotency-key": key });
    expect(res.status).toBe(400);
    expect(res.body.error?.code).toBe("invalid_request");
    expect(res.body.error?.message).toMatch(/^Idempotency-Key header: /);
    expect(await h.deps.prompts.list(sessionId)).toEqual([]);
    expect(sentToAgent("never stored")).toBe(0);
  });
});

describe("the Slack worker: a thread message is exactly one prompt", () => {
  let slack: SlackWebApiStandIn;
  beforeEach(async () => {
    slack = await startSlackWebApi();
  });
  afterEach(async () => {
    await slack.close();
  });

  /** A worker over the harness's route deps, with the prompt queue replaced (fault injection). */
  async function workerWith(prompts: PromptQueue = h.deps.prompts): Promise<{ worker: SlackWorker; sessionId: string }> {
    const store = composeSlackStore(h.table.doc, h.table.tableName);
    const web = slackWebClient({ botToken: "xoxb-test", apiUrl: slack.url, logger: h.httpDeps.logger });
    const http: HttpDeps = { ...routeDeps(), prompts };
    const worker = new SlackWorker({ http, store, web, logger: h.httpDeps.logger, now: () => new Date() });
    const sessionId = await runningSession();
    const bound = await store.bindWorkspace({ teamId: TEAM, orgId: "org-a", defaultRepo: null, now: new Date() });
    expect(bound).not.toBe("conflict");
    await store.putThread({ sessionId, teamId: TEAM, channelId: CHANNEL, threadTs: THREAD_TS, userId: USER }, new Date());
    return { worker, sessionId };
  }

  function threadMessage(type: "message" | "app_mention", ts: string, text: string, eventId: string): SlackDelivery {
    const body = JSON.stringify({ team_id: TEAM, event: { type, channel: CHANNEL, user: USER, text, ts, thread_ts: THREAD_TS } });
    return { kind: "event", key: `event:${eventId}`, body, receivedAt: new Date().toISOString() };
  }

  /** The real queue whose stores (with or without a key) first run `before`, then `after` once stored. */
  function faultyQueue(hooks: { before?: () => Promise<void>; after?: () => Promise<void> }): PromptQueue {
    const real = h.deps.prompts;
    let armed = true;
    const once = async (hook: (() => Promise<void>) | undefined) => {
      if (!armed || !hook) return;
      armed = false;
      await hook();
    };
    return {
      enqueue: async (input) => {
        await once(hooks.before);
        const stored = await real.enqueue(input);
        await once(hooks.after);
        return stored;
      },
      enqueueOnce: async (input) => {
        await once(hooks.before);
        const stored = await real.enqueueOnce(input);
        await once(hooks.after);
        return stored;
      },
      getKeyed: (sessionId, promptId) => real.getKeyed(sessionId, promptId),
      list: (sessionId, status) => real.list(sessionId, status),
      listOpen: (sessionId) => real.listOpen(sessionId),
      move: (prompt, from, to, now, changes) => real.move(prompt, from, to, now, changes),
    };
  }

  /** A Lambda killed or timed out mid-call: the invocation never returns, no cleanup runs. */
  const killed = () => new Promise<void>(() => undefined);

  it("killed before the prompt is stored: the redelivery stores and delivers it once", async () => {
    let reached = false;
    const { worker, sessionId } = await workerWith(faultyQueue({ before: () => ((reached = true), killed()) }));
    const delivery = threadMessage("message", "1800000000.000100", "crash before store", "Ev-before");
    void worker.handle(delivery); // the killed invocation: abandoned, as Lambda abandons it
    await waitFor(() => reached, { message: "the first invocation at the prompt store" });
    await worker.handle(delivery); // SQS's redelivery after the visibility timeout
    const stored = await h.deps.prompts.list(sessionId);
    expect(stored.map((p) => p.content)).toEqual(["crash before store"]);
    await waitFor(() => sentToAgent("crash before store") === 1, { message: "the prompt delivered to the agent" });
  });

  it("killed after the prompt is stored, before the delivery is acknowledged: the redelivery adds nothing", async () => {
    let reached = false;
    const { worker, sessionId } = await workerWith(faultyQueue({ after: () => ((reached = true), killed()) }));
    const delivery = threadMessage("message", "1800000000.000200", "crash after store", "Ev-after");
    void worker.handle(delivery);
    await waitFor(() => reached, { message: "the first invocation past the prompt store" });
    await worker.handle(delivery);
    const stored = await h.deps.prompts.list(sessionId);
    expect(stored.map((p) => p.content)).toEqual(["crash after store"]);
    // The killed invocation never delivered it: the redelivery did, once.
    await waitFor(() => sentToAgent("crash after store") === 1, { message: "the prompt delivered to the agent" });
    expect(sentToAgent("crash after store")).toBe(1);
  });

  it("an error after the prompt is stored makes SQS redeliver; the redelivery adds nothing", async () => {
    const { worker, sessionId } = await workerWith(faultyQueue({ after: () => Promise.reject(new Error("connection reset after the write")) }));
    const delivery = threadMessage("message", "1800000000.000300", "error after store", "Ev-error");
    await expect(worker.handle(delivery)).rejects.toThrow();
    await worker.handle(delivery);
    const stored = await h.deps.prompts.list(sessionId);
    expect(stored.map((p) => p.content)).toEqual(["error after store"]);
    await waitFor(() => sentToAgent("error after store") === 1, { message: "the prompt delivered to the agent" });
  });

  it("twin deliveries (message and app_mention of one ts), concurrent and repeated, are one prompt", async () => {
    const { worker, sessionId } = await workerWith();
    const ts = "1800000000.000400";
    await Promise.all([
      worker.handle(threadMessage("message", ts, "<@UBOT> twins", "Ev-twin-1")),
      worker.handle(threadMessage("app_mention", ts, "<@UBOT> twins", "Ev-twin-2")),
    ]);
    await worker.handle(threadMessage("message", ts, "<@UBOT> twins", "Ev-twin-1"));
    await worker.handle(threadMessage("message", "1800000000.000500", "another message", "Ev-other"));
    const stored = await h.deps.prompts.list(sessionId);
    expect(stored.map((p) => p.content).sort()).toEqual(["another message", "twins"]);
    // "twins" went to the agent once; "another message" waits behind its turn (the scripted turn never ends).
    await waitFor(() => sentToAgent("twins") === 1, { message: "the twins' prompt delivered" });
    expect(agent.prompts.map((p) => p.text)).toEqual(["twins"]);
    // Nothing was refused in the thread.
    expect(slack.callsOf("chat.postMessage")).toEqual([]);
  });
});
