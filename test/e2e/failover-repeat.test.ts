/**
 * The 429 failover is deterministic (issue 25 leftovers): OpenCode retries a rate limit forever,
 * so with a next model the relay aborts the turn and sends the prompt again on that model
 * (functions/relay/agent-turns.ts `onRetry`, `settleFailedTurn`). OpenCode 1.18.33 reports the
 * session idle a moment before its aborted loop has ended, and a prompt sent in that moment is
 * cut short with an empty answer; `resendInterrupted` sends it once more. This repeats the whole
 * scenario (3 batches of 4 sessions failing over at once) on real OpenCode with the development
 * model (`fail 429`) and requires every run to
 * end the same way: one `agent.failover` from `dev/echo` to `dev/echo-backup`, the backup's
 * answer, the prompt `completed`. It prints how often the cut-short turn was seen (the race the
 * workaround exists for), so a run on a loaded machine shows whether it still happens.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import { MAX_RESENDS_AFTER_ABORT } from "../../functions/relay/agent-turns";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { waitFor as poll } from "../support/wait-for";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

/** Sessions failing over at once in each batch (concurrency is load: the race is timing). */
const RUNS_PER_TEST = 4;

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];
let cutShort = 0;
let runs = 0;

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2" } }));
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime, clients));
});
afterAll(async () => {
  console.error(`429 failover: ${runs} runs, ${cutShort} with the failover turn cut short by the aborted loop (sent again)`);
  await Promise.all(clients.map((c) => c.close()));
  await runtime?.close();
});

async function agentMessagesOf<T>(sessionId: string): Promise<T[]> {
  const s = await runtime.deps.sessions.getSession(sessionId);
  const endpoint = await agentEndpoint(runtime.flowDeps.sandboxKeys, sessionId, String(s?.openCodeUrl));
  const res = await fetch(`${endpoint.url}/session/${s?.codingAgentSessionId}/message`, { headers: { authorization: String(endpoint.authorization) } });
  expect(res.status).toBe(200);
  return (await res.json()) as T[];
}

async function runningSession(): Promise<{ id: string; client: TestWsClient }> {
  const res = await api.request("POST", "/v1/sessions", { body: { fallbackModels: ["dev/echo-backup"] } });
  expect(res.status, res.text).toBe(201);
  const id = (res.body as { session: { id: string } }).session.id;
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId: id, token: runtime.devApiToken });
  clients.push(client);
  await client.waitFor((m) => m.type === "status" && m.status === "running", 90_000, "running");
  return { id, client };
}

/** One `fail 429` prompt: exactly one failover, the backup's answer, the prompt completed. */
async function failOverOnce(id: string, client: TestWsClient, n: number): Promise<void> {
  const from = client.received.length;
  const content = `fail 429 (run ${n})`;
  client.send({ type: "prompt", content });
  const isAnswer = (m: ServerMessage) => m.type === "message.finalize" && m.text === `echo: ${content}` && m.reason === "end_turn";
  await client
    .waitFor((m) => isAnswer(m) && client.received.indexOf(m) >= from, 60_000, `the backup model's answer to run ${n}`)
    .catch((err: unknown) => {
      // What the client got since the prompt, texts and reasons included (CI prints only this).
      throw new Error(`${(err as Error).message}\n${client.received.slice(from).map((m) => JSON.stringify(m).slice(0, 240)).join("\n")}`);
    });
  await poll(() => runtime.deps.prompts.list(id), {
    until: (prompts) => prompts.every((p) => p.status === "completed"),
    message: (prompts) => `run ${n}: every prompt completed; got ${JSON.stringify(prompts.map((p) => p.status))}`,
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  const frames = client.received.slice(from);
  const failovers = frames.filter((m) => m.type === "agent.failover");
  expect(failovers, `run ${n}`).toHaveLength(1);
  expect(failovers[0], `run ${n}`).toMatchObject({ from: "dev/echo", to: "dev/echo-backup", reason: "rate_limit" });
  expect(frames.filter((m) => m.type === "error" && m.code === "agent_error"), `run ${n}: no failed turn reaches clients but the rate limit`).toHaveLength(1);
  const afterFailover = frames.slice(frames.indexOf(failovers[0] as ServerMessage));
  expect(afterFailover.filter(isAnswer), `run ${n}`).toHaveLength(1);
  // What the agent was sent: the prompt, the failover, and once more when the failover's turn was cut short.
  const userMessages = (await agentMessagesOf<{ info: { role: string; model?: { modelID?: string } } }>(id)).filter((m) => m.info.role === "user");
  expect(userMessages.length, `run ${n}: user messages the agent got`).toBeGreaterThanOrEqual(2);
  expect(userMessages.length, `run ${n}: user messages the agent got`).toBeLessThanOrEqual(2 + MAX_RESENDS_AFTER_ABORT);
  if (userMessages.length > 2) cutShort++;
  runs++;
}

describe("429 failover, repeated", () => {
  // A fresh session per run: after a failover OpenCode keeps the session on the model the last
  // turn ran on (a prompt without a model uses the session's last one), so a second `fail 429`
  // in the same session goes to the backup model and never fails over.
  for (const batch of [1, 2, 3]) {
    it(`batch ${batch}: ${RUNS_PER_TEST} sessions at once, each rate-limited turn fails over once and completes on the backup model`, { timeout: 240_000 }, async () => {
      await Promise.all(
        Array.from({ length: RUNS_PER_TEST }, async (_, i) => {
          const { id, client } = await runningSession();
          await failOverOnce(id, client, (batch - 1) * RUNS_PER_TEST + i + 1);
        }),
      );
    });
  }
});
