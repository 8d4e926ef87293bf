/**
 * Issue 25 leftovers over real sockets on the local runtime, with real OpenCode and the
 * development model:
 * - a client that joins mid-answer, right after a frame went out (the relay's connection list just
 *   read), misses nothing: it gets the answer so far, then every delta, and has the full text
 *   before `message.finalize` (`pause <N>s` holds the model's stream halfway, so the join falls
 *   between two deltas of one message, deterministically).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
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
