/**
 * Issue 25 leftovers over real sockets on the local runtime, with real OpenCode and the
 * development model:
 * - a client that joins mid-answer, right after a frame went out (the relay's connection list just
 *   read), misses nothing: it gets the answer so far, then every delta, and has the full text
 *   before `message.finalize` (`pause <N>s` holds the model's stream halfway, so the join falls
 *   between two deltas of one message, deterministically);
 * - an empty answer to a prompt just sent (OpenCode 1.18.33 ends a turn at once when the prompt
 *   lands as its loop winds down: seen only under load, so the development model's
 *   `answer empty once` produces the same empty answer deterministically) is asked for again:
 *   the client gets the answer, the prompt completes, and neither OpenCode's history nor the
 *   transcript holds the user message twice.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import { OpenCodeMessageReader } from "../../functions/relay/agent-messages";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, waitFor, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05 }));
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime, clients));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime?.close();
});

async function connect(sessionId: string): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token: runtime.devApiToken });
  clients.push(client);
  return client;
}

async function running(): Promise<{ id: string; client: TestWsClient }> {
  const res = await api.request("POST", "/v1/sessions", { body: {} });
  expect(res.status).toBe(201);
  const id = (res.body as { session: { id: string } }).session.id;
  const client = await connect(id);
  await client.waitFor((m) => m.type === "status" && m.status === "running", 90_000, "running");
  return { id, client };
}

/** A message's text as a client reconstructs it from `message.create` and the deltas it got before `message.finalize`. */
function streamedText(received: ServerMessage[], messageId: string): { created: boolean; text: string } {
  let created = false;
  let text = "";
  for (const m of received) {
    if (m.messageId !== messageId) continue;
    if (m.type === "message.finalize") break;
    if (m.type === "message.create") created = true;
    if (m.type === "message.part.text-delta") {
      expect(created, "a delta before message.create").toBe(true);
      text += String(m.delta);
    }
  }
  return { created, text };
}

describe("a client joining mid-answer (issue 25)", () => {
  it("gets the answer so far and every later delta: the full text before message.finalize", async () => {
    const { id, client } = await running();
    const content = "joining mid-answer pause 4s then the rest";
    client.send({ type: "prompt", content });
    // The worst moment: right after a frame of the answer went out to the first client.
    const first = await client.waitFor((m) => m.type === "message.part.text-delta", 60_000, "the first half of the answer");
    const messageId = String(first.messageId);
    const late = await connect(id);
    const init = await late.waitFor((m) => m.type === "init", 30_000, "init");
    expect(JSON.stringify(init.messages)).not.toContain(messageId);
    const finalize = await late.waitFor((m) => m.type === "message.finalize" && m.messageId === messageId, 60_000, "the finalize");
    expect(finalize.text).toBe(`echo: ${content}`);
    expect(streamedText(late.received, messageId)).toEqual({ created: true, text: `echo: ${content}` });
    // The first client saw it once, in order.
    expect(streamedText(client.received, messageId)).toEqual({ created: true, text: `echo: ${content}` });
  }, 150_000);
});

describe("an empty answer to a prompt just sent (issue 25)", () => {
  it("is asked for again: the answer reaches the client, the prompt completes, the user message is stored once", async () => {
    const { id, client } = await running();
    const content = "tell me answer empty once";
    const from = client.received.length;
    client.send({ type: "prompt", content });
    const empty = await client.waitFor((m) => m.type === "message.finalize" && client.received.indexOf(m) >= from, 60_000, "the empty answer");
    expect(empty).toMatchObject({ text: "", reason: "end_turn" });
    await client.waitFor((m) => m.type === "message.finalize" && m.text === `echo: ${content}`, 60_000, "the answer asked for again");
    await waitFor("the prompt completed", async () => (await runtime.deps.prompts.list(id)).map((p) => p.status).join() === "completed", 30_000);
    // OpenCode's history: the user message once, with one text part, answered once.
    const s = await runtime.deps.sessions.getSession(id);
    const endpoint = await agentEndpoint(runtime.flowDeps.sandboxKeys, id, String(s?.openCodeUrl));
    const stored = await new OpenCodeMessageReader().listMessages(endpoint, String(s?.codingAgentSessionId));
    const users = stored.filter((m) => m.info.role === "user");
    expect(users).toHaveLength(1);
    expect(users[0]?.parts.filter((p) => p.type === "text").map((p) => p.text)).toEqual([content]);
    expect(stored.filter((m) => m.info.role === "assistant").map((m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join(""))).toEqual([`echo: ${content}`]);
    // The transcript: the user message once.
    const items = ((await api.request("GET", `/v1/sessions/${id}/messages`)).body as { items: { role: string; text: string }[] }).items;
    expect(items.filter((m) => m.role === "user").map((m) => m.text)).toEqual([content]);
    expect(items.filter((m) => m.role === "assistant").map((m) => m.text)).toContain(`echo: ${content}`);
    // The queue moves on.
    client.send({ type: "prompt", content: "and then?" });
    await client.waitFor((m) => m.type === "message.finalize" && m.text === "echo: and then?", 60_000, "the next answer");
  }, 150_000);
});
