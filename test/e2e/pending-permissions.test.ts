/**
 * A permission question the agent is waiting on reaches clients that were not there when it was
 * asked (issue 25 §3, policy `ask`): a client that connects late gets it after its `init`, and a
 * relay that takes the session over (drain or crash) puts it again to the clients it finds. Real
 * OpenCode with the development model (`read outside <path>`: OpenCode's default rules ask before
 * reading outside the workspace). Answering a question twice is harmless (`not_found`).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
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
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime, clients));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime?.close();
});

async function connect(sessionId: string, token = runtime.devApiToken): Promise<TestWsClient> {
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId, token });
  clients.push(client);
  return client;
}

/** A running `ask` session whose agent waits on the permission to read /etc/hostname. */
async function waitingOnPermission(): Promise<{ id: string; client: TestWsClient; asked: ServerMessage }> {
  const res = await api.request("POST", "/v1/sessions", { body: { permissionPolicy: "ask" } });
  expect(res.status, res.text).toBe(201);
  const id = (res.body as { session: { id: string } }).session.id;
  const client = await connect(id);
  await client.waitFor((m) => m.type === "status" && m.status === "running", 90_000, "running");
  const from = client.received.length;
  client.send({ type: "prompt", content: "read outside /etc/hostname" });
  const asked = await client.waitFor((m) => m.type === "permission.asked" && client.received.indexOf(m) >= from, 60_000, "permission.asked");
  expect(asked).toMatchObject({ permission: "external_directory", patterns: ["/etc/*"], metadata: { filepath: "/etc/hostname" } });
  return { id, client, asked };
}

/**
 * `client` answers, which completes the turn: the read ran (as `observer`, a client connected since
 * before the turn, sees it), the prompt is `completed`, and a second answer is refused as `not_found`.
 */
async function answerAndFinish(id: string, client: TestWsClient, permissionId: unknown, observer = client): Promise<void> {
  client.send({ type: "permission.reply", permissionId, response: "once" });
  await observer.waitFor((m) => m.type === "message.part.tool-update" && m.tool === "read" && m.status === "completed", 60_000, "the read, approved");
  await poll(() => runtime.deps.prompts.list(id), {
    until: (prompts) => prompts.map((p) => p.status).join() === "completed",
    message: (prompts) => `the prompt completed; got ${JSON.stringify(prompts.map((p) => p.status))}`,
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  client.send({ type: "permission.reply", permissionId, response: "once" });
  expect(await client.next((m) => m.type === "error", 10_000, "the second answer refused")).toMatchObject({ code: "not_found" });
}

describe("pending permission questions (issue 25 §3)", () => {
  it("a client that connects while the question is pending gets it after its init, and its answer completes the turn", async () => {
    const { id, client, asked } = await waitingOnPermission();
    const late = await connect(id, bobToken);
    const init = await late.waitFor((m) => m.type === "init", 30_000, "the late client's init");
    const again = await late.waitFor((m) => m.type === "permission.asked" && m.permissionId === asked.permissionId, 30_000, "the pending question, for the late client");
    expect(late.received.indexOf(again)).toBeGreaterThan(late.received.indexOf(init));
    // The same frame as the live one.
    expect(again).toEqual(asked);
    await answerAndFinish(id, late, asked.permissionId, client);
  });

  for (const mode of ["drain", "crash"] as const) {
    it(`after a relay takeover (${mode}) the question is put again to the connected clients, and answering it completes the turn`, async () => {
      const { id, client, asked } = await waitingOnPermission();
      const from = client.received.length;
      const successor = await runtime.restartRelay(mode);
      const again = await client.waitFor(
        (m) => m.type === "permission.asked" && m.permissionId === asked.permissionId && client.received.indexOf(m) >= from,
        60_000,
        `the question again after the ${mode} takeover`,
      );
      expect(again).toEqual(asked);
      expect(successor.heldSessions()).toContain(id);
      await answerAndFinish(id, client, asked.permissionId);
      // The successor announces the settlement of the question it put.
      await client.waitFor((m) => m.type === "permission.replied" && m.permissionId === asked.permissionId && client.received.indexOf(m) >= from, 30_000, "permission.replied");
    });
  }
});
