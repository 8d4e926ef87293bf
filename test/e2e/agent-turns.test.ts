/**
 * Issue 25 §2, §3, §6 over real sockets on the local runtime, with real OpenCode and the
 * development model taught to fail (`fail <status>`: the model `echo` answers like a provider
 * refusing the request, `echo-backup` answers), to need a permission (`read outside <path>`:
 * OpenCode's default rules ask before reading outside the workspace) and to call a tool
 * (`$ <command>`):
 * - a failed model call reaches clients (an `error` frame, `message.finalize` with reason
 *   `error` and the error), the transcript and the prompt (`failed`); the queue moves on;
 * - model failover on auth, billing and rate-limit errors: the turn runs again on the next model
 *   of `fallbackModels`, clients get `agent.failover`, the transcript a note;
 * - permissions: `auto` approves, `ask` asks the clients and forwards their answer;
 * - tool updates carry the call's input and output;
 * - presence: `connectedUsers` in `init`, `user.joined` / `user.left`, authors on prompts and
 *   user messages.
 */
import { hostname } from "node:os";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { waitFor as poll } from "../support/wait-for";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
let bobToken: string;
const clients: TestWsClient[] = [];

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2", RELAY_LEASE_TTL_SECONDS: "1.5" } }));
  bobToken = await runtime.addApiToken({ userId: "bob", orgId: "dev-org" });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime.close();
});

async function createSession(body: Record<string, unknown> = {}): Promise<string> {
  const res = await api.request("POST", "/v1/sessions", { body });
  expect(res.status).toBe(201);
  return (res.body as { session: { id: string } }).session.id;
}

async function connect(sessionId: string, token = runtime.devApiToken): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token });
  clients.push(client);
  return client;
}

async function running(body: Record<string, unknown> = {}): Promise<{ id: string; client: TestWsClient }> {
  const id = await createSession(body);
  const client = await connect(id);
  await client.waitFor((m) => m.type === "status" && m.status === "running", 90_000, "running");
  return { id, client };
}

async function promptStatuses(id: string, expected: string): Promise<void> {
  await poll(() => runtime.deps.prompts.list(id), {
    until: (prompts) => prompts.map((p) => p.status).join() === expected,
    message: (prompts) => `prompt statuses ${expected}; got ${JSON.stringify(prompts.map((p) => p.status))}`,
    timeoutMs: 60_000,
    intervalMs: 200,
  });
}

async function transcript(id: string): Promise<{ role: string; text: string; reason?: string; error?: { code: string }; authorId?: string; parts: Record<string, unknown>[] }[]> {
  const res = await api.request("GET", `/v1/sessions/${id}/messages`);
  return (res.body as { items: never[] }).items;
}

const after = (client: TestWsClient, from: number) => client.received.slice(from);

/** OpenCode's own status of the session's agent session (`busy`, `retry`, or `idle`). */
async function agentStatus(sessionId: string): Promise<string> {
  const s = await runtime.deps.sessions.getSession(sessionId);
  const endpoint = await agentEndpoint(runtime.flowDeps.sandboxKeys, sessionId, String(s?.openCodeUrl));
  const res = await fetch(`${endpoint.url}/session/status`, { headers: { authorization: String(endpoint.authorization) } });
  const map = (await res.json()) as Record<string, { type: string }>;
  return map[String(s?.codingAgentSessionId)]?.type ?? "idle";
}

describe("agent errors (issue 25 §2)", () => {
  it("a billing error: error frame, finalize with reason error, prompt failed, transcript records it; the next prompt runs", async () => {
    const { id, client } = await running();
    const from = client.received.length;
    client.send({ type: "prompt", content: "fail 402" });
    const error = await client.waitFor((m) => m.type === "error" && client.received.indexOf(m) >= from, 60_000, "the error frame");
    expect(error).toMatchObject({ code: "agent_error", error: { code: "billing" } });
    expect(String(error.message)).toContain("billing");
    const finalize = await client.waitFor((m) => m.type === "message.finalize" && client.received.indexOf(m) >= from, 60_000, "the finalize");
    expect(finalize).toMatchObject({ reason: "error", error: { code: "billing" } });
    await promptStatuses(id, "failed");
    expect((await runtime.deps.prompts.list(id))[0]?.failure).toMatchObject({ reason: "error", code: "billing" });
    // No provider URL or headers reach clients.
    expect(JSON.stringify(after(client, from))).not.toMatch(/127\.0\.0\.1|responseHeaders|chat\/completions/);
    await poll(() => transcript(id), { until: (items) => items.some((m) => m.role === "assistant" && m.reason === "error"), message: "the failed message in the transcript", timeoutMs: 30_000, intervalMs: 200 });
    expect((await transcript(id)).find((m) => m.role === "assistant")).toMatchObject({ reason: "error", error: { code: "billing" } });

    client.send({ type: "prompt", content: "still there?" });
    await client.waitFor((m) => m.type === "message.finalize" && m.text === "echo: still there?", 60_000, "the next answer");
    await promptStatuses(id, "failed,completed");
  });

  for (const [status, code] of [
    ["401", "auth"],
    ["429", "rate_limit"],
  ] as const) {
    it(`model failover on ${code} (${status}): the turn runs again on the next model, clients and the transcript are told`, async () => {
      const { id, client } = await running({ fallbackModels: ["dev/echo-backup"] });
      const from = client.received.length;
      client.send({ type: "prompt", content: `fail ${status}` });
      const failover = await client.waitFor((m) => m.type === "agent.failover" && client.received.indexOf(m) >= from, 60_000, "agent.failover");
      expect(failover).toMatchObject({ from: "dev/echo", to: "dev/echo-backup", reason: code });
      await client
        .waitFor((m) => m.type === "message.finalize" && m.text === `echo: fail ${status}` && m.reason === "end_turn", 60_000, "the answer of the backup model")
        .catch((err: unknown) => {
          throw new Error(`${String(err)}: ${JSON.stringify(after(client, from))}`);
        });
      await promptStatuses(id, "completed");
      const items = await transcript(id);
      expect(items.find((m) => m.role === "system")?.text).toContain("dev/echo-backup");
      const answers = items.filter((m) => m.role === "assistant");
      expect(answers[0]).toMatchObject({ reason: "error", error: { code } });
      expect(answers.at(-1)).toMatchObject({ reason: "end_turn", text: `echo: fail ${status}` });
    });
  }

  it("without a next model a rate limit is OpenCode's to retry (no failover); canceled meanwhile, the turn failed with the rate limit", async () => {
    const { id, client } = await running();
    const from = client.received.length;
    client.send({ type: "prompt", content: "fail 429" });
    // OpenCode is waiting out the rate limit (its own retry loop).
    await poll(() => agentStatus(id), { until: (s) => s === "retry", message: "OpenCode retrying", timeoutMs: 30_000, intervalMs: 100 });
    expect((await runtime.deps.prompts.list(id)).map((p) => p.status)).toEqual(["processing"]);
    client.send({ type: "cancel" });
    await promptStatuses(id, "failed");
    // The relay saw the retry status (the stream is ordered) and did not fail over.
    expect(after(client, from).some((m) => m.type === "agent.failover")).toBe(false);
    // OpenCode ends a turn aborted while it waits out a retry with no error: the turn failed with the rate limit.
    expect((await runtime.deps.prompts.list(id))[0]?.failure).toMatchObject({ reason: "error", code: "rate_limit" });
    expect(after(client, from).find((m) => m.type === "message.finalize")).toMatchObject({ reason: "error", error: { code: "rate_limit" } });
  });
});

describe("tool calls and permissions (issue 25 §2, §3)", () => {
  it("tool updates carry the call's input and output", async () => {
    const { client } = await running();
    const from = client.received.length;
    client.send({ type: "prompt", content: "$ echo tool-output-42" });
    const done = await client.waitFor((m) => m.type === "message.part.tool-update" && m.status === "completed" && client.received.indexOf(m) >= from, 60_000, "the completed tool call");
    expect(done).toMatchObject({ tool: "bash", input: { command: "echo tool-output-42" } });
    expect(String(done.output)).toContain("tool-output-42");
  });

  it("policy auto (the default) approves a permission request: the read outside the workspace completes", async () => {
    const { id, client } = await running();
    const from = client.received.length;
    client.send({ type: "prompt", content: "read outside /etc/hostname" });
    const done = await client.waitFor((m) => m.type === "message.part.tool-update" && m.tool === "read" && (m.status === "completed" || m.status === "error") && client.received.indexOf(m) >= from, 60_000, "the read");
    expect(done.status).toBe("completed");
    expect(String(done.output)).toContain(readFileSync("/etc/hostname", "utf8").trim() || hostname());
    expect(after(client, from).some((m) => m.type === "permission.asked")).toBe(false);
    await promptStatuses(id, "completed");
  });

  it("policy ask: clients get permission.asked, a client's permission.reply answers it, everyone hears permission.replied", async () => {
    const { id, client } = await running({ permissionPolicy: "ask" });
    const other = await connect(id, bobToken);
    await other.waitFor((m) => m.type === "init", 30_000, "bob's init");
    const from = client.received.length;
    const otherFrom = other.received.length;
    client.send({ type: "prompt", content: "read outside /etc/hostname" });
    const asked = await client.waitFor((m) => m.type === "permission.asked" && client.received.indexOf(m) >= from, 60_000, "permission.asked");
    expect(asked).toMatchObject({ permission: "external_directory", patterns: ["/etc/*"], metadata: { filepath: "/etc/hostname" } });
    await other.waitFor((m) => m.type === "permission.asked" && m.permissionId === asked.permissionId && other.received.indexOf(m) >= otherFrom, 10_000, "bob sees the question");
    // A bad answer changes nothing.
    other.send({ type: "permission.reply", permissionId: asked.permissionId, response: "maybe" });
    expect(await other.next((m) => m.type === "error", 10_000, "invalid frame")).toMatchObject({ code: "invalid_frame" });
    other.send({ type: "permission.reply", permissionId: asked.permissionId, response: "once" });
    await client.waitFor((m) => m.type === "permission.replied" && m.permissionId === asked.permissionId, 30_000, "permission.replied");
    const done = await client.waitFor((m) => m.type === "message.part.tool-update" && m.tool === "read" && m.status === "completed", 60_000, "the read");
    expect(String(done.output).length).toBeGreaterThan(0);
    await promptStatuses(id, "completed");
    // Answered already: a second answer is a 404-style error frame, the connection stays.
    other.send({ type: "permission.reply", permissionId: asked.permissionId, response: "reject" });
    expect(await other.next((m) => m.type === "error", 10_000, "the late answer refused")).toMatchObject({ code: "not_found" });
  });

  it("policy ask, rejected: the tool call ends in error and the turn still ends", async () => {
    const { id, client } = await running({ permissionPolicy: "ask" });
    const from = client.received.length;
    client.send({ type: "prompt", content: "read outside /etc/hostname" });
    const asked = await client.waitFor((m) => m.type === "permission.asked" && client.received.indexOf(m) >= from, 60_000, "permission.asked");
    client.send({ type: "permission.reply", permissionId: asked.permissionId, response: "reject" });
    await client.waitFor((m) => m.type === "message.part.tool-update" && m.tool === "read" && m.status === "error", 60_000, "the refused read");
    await poll(() => runtime.deps.prompts.list(id), { until: (p) => p[0]?.status !== "processing", message: "the turn ended", timeoutMs: 60_000, intervalMs: 200 });
  });
});

describe("presence (issue 25 §6)", () => {
  it("connectedUsers in init, user.joined / user.left, authors on prompts and user messages", async () => {
    const { id, client } = await running();
    const bob = await connect(id, bobToken);
    const bobInit = await bob.waitFor((m) => m.type === "init", 30_000, "bob's init");
    expect((bobInit.data as { connectedUsers: unknown }).connectedUsers).toEqual([{ userId: "dev-user" }, { userId: "bob" }]);
    await client.waitFor((m) => m.type === "user.joined" && m.userId === "bob", 10_000, "user.joined");
    // A second connection of a user already there is no arrival.
    const bob2 = await connect(id, bobToken);
    await bob2.waitFor((m) => m.type === "init", 30_000, "bob's second init");

    const from = client.received.length;
    bob.send({ type: "prompt", content: "bob asks" });
    expect(await bob.next((m) => m.type === "prompt.queued", 10_000, "bob's prompt.queued")).toMatchObject({ authorId: "bob" });
    expect(await client.waitFor((m) => m.type === "prompt.queued" && client.received.indexOf(m) >= from, 10_000, "the other client sees it")).toMatchObject({
      authorId: "bob",
      content: "bob asks",
    });
    await client.waitFor((m) => m.type === "message.finalize" && m.text === "echo: bob asks", 60_000, "the answer");
    await poll(() => transcript(id), { until: (items) => items.some((m) => m.role === "user" && m.authorId === "bob"), message: "bob's message with its author", timeoutMs: 30_000, intervalMs: 200 });

    await bob.close();
    await poll(() => runtime.flowDeps.connections.listLive(id, new Date()), { until: (c) => c.length === 2, message: "bob's first connection gone", timeoutMs: 10_000, intervalMs: 100 });
    expect(client.received.some((m) => m.type === "user.left")).toBe(false);
    await bob2.close();
    const left = await client.waitFor((m) => m.type === "user.left", 10_000, "user.left");
    expect(left).toEqual({ type: "user.left", userId: "bob" });
    expect(client.received.filter((m: ServerMessage) => m.type === "user.joined")).toHaveLength(1);
  });
});

describe("the contract", () => {
  it("describes every frame the server sent in this file's tests (agent.failover, permission.asked/replied, agent errors), field for field", () => {
    expect(TestWsClient.contractIssues).toEqual([]);
  });
});
