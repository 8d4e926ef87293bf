/**
 * Failover chains carry their keys (seed 004, issue 25 leftovers): the org's default chain
 * (`PUT /v1/org/model` `fallbackModels`, copied into sessions created without their own), and a
 * key for every provider of the chain in the sandbox. Real OpenCode with the development model
 * told to refuse any request without one key (DEV_MODEL_REQUIRED_KEY): the only place that key
 * comes from is the org chain's `dev/echo-backup` entry, so the session's `dev/echo` answers and
 * its 429 fails over to `dev/echo-backup` only because the fallback's key reached the sandbox;
 * the chain's `openai/gpt-4o` (another provider, which cannot be reached here) has its own key in
 * the sandbox's environment.
 */
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { apiClient, startRuntimeForTest, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { waitFor as poll } from "../support/wait-for";
import { TestWsClient } from "../support/ws-client";

const MODEL_KEY = "dev-model-key-for-the-fallback-chain-0123456789";
const OPENAI_KEY = "sk-proj-fallback-chain-openai-key-0123456789";
const CHAIN = [
  { id: "dev/echo-backup", apiKeySecret: "DEV_KEY" },
  { id: "openai/gpt-4o", apiKeySecret: "OPENAI_KEY" },
];

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2", DEV_MODEL_REQUIRED_KEY: MODEL_KEY } }));
  for (const [name, value] of [["DEV_KEY", MODEL_KEY], ["OPENAI_KEY", OPENAI_KEY]]) {
    expect((await api.request("PUT", `/v1/secrets/${name}`, { body: { value } })).status).toBe(200);
  }
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime, clients));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime?.close();
});

/** The environment of the session's sandbox processes (the local provider's children). */
function sandboxEnvironment(sessionId: string): string[] {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    let env: string[];
    try {
      env = readFileSync(`/proc/${pid}/environ`, "latin1").split("\0");
    } catch {
      continue;
    }
    if (env.includes(`SESSION_ID=${sessionId}`)) return env;
  }
  return [];
}

describe("failover chains and their keys", () => {
  it("the org's default chain: admins set it (secrets checked, one key per provider), GET shows it, sessions without their own copy it, [] opts out", async () => {
    const missing = await api.request("PUT", "/v1/org/model", { body: { model: null, fallbackModels: [{ id: "openai/gpt-4o", apiKeySecret: "MISSING" }] } });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain("body.fallbackModels.0.apiKeySecret");
    const conflict = await api.request("PUT", "/v1/org/model", { body: { model: { id: "openai/gpt-5", apiKeySecret: "DEV_KEY" }, fallbackModels: CHAIN } });
    expect(conflict.status).toBe(400);
    expect(conflict.text).toContain("share one key (OPENAI_API_KEY)");
    expect((await api.request("GET", "/v1/org/model")).body).toEqual({ model: null, fallbackModels: [] });

    const set = await api.request("PUT", "/v1/org/model", { body: { model: null, fallbackModels: CHAIN } });
    expect(set.status, set.text).toBe(200);
    expect((await api.request("GET", "/v1/org/model")).body).toEqual({ model: null, fallbackModels: CHAIN });
    // A PUT without `fallbackModels` keeps the chain.
    expect((await api.request("PUT", "/v1/org/model", { body: { model: null } })).body).toEqual({ model: null, fallbackModels: CHAIN });
    const member = apiClient(runtime.url, await runtime.addApiToken({ userId: "bob", orgId: "dev-org" }));
    expect((await member.request("PUT", "/v1/org/model", { body: { model: null, fallbackModels: [] } })).status).toBe(403);

    const inherits = await api.request("POST", "/v1/sessions", { body: {} });
    expect((inherits.body as { session: unknown }).session).toMatchObject({ fallbackModels: ["dev/echo-backup", "openai/gpt-4o"], fallbackKeySecrets: { "dev/echo-backup": "DEV_KEY", "openai/gpt-4o": "OPENAI_KEY" } });
    const optsOut = await api.request("POST", "/v1/sessions", { body: { fallbackModels: [] } });
    expect((optsOut.body as { session: unknown }).session).toMatchObject({ fallbackModels: [], fallbackKeySecrets: {} });
    for (const id of [inherits, optsOut].map((r) => (r.body as { session: { id: string } }).session.id)) await api.request("DELETE", `/v1/sessions/${id}`);
  });

  it("every provider of the chain has its key in the sandbox, and a 429 fails over to the fallback whose key it is", async () => {
    expect((await api.request("PUT", "/v1/org/model", { body: { model: null, fallbackModels: CHAIN } })).status).toBe(200);
    const res = await api.request("POST", "/v1/sessions", { body: { model: { id: "dev/echo" } } });
    expect(res.status, res.text).toBe(201);
    const id = (res.body as { session: { id: string } }).session.id;
    const client = await TestWsClient.connect(runtime.wsUrl, { sessionId: id, token: runtime.devApiToken });
    clients.push(client);
    await client.waitFor((m) => m.type === "status" && m.status === "running", 90_000, "running");
    const env = sandboxEnvironment(id);
    expect(env).toContain(`DEV_MODEL_API_KEY=${MODEL_KEY}`);
    expect(env).toContain(`OPENAI_API_KEY=${OPENAI_KEY}`);

    const from = client.received.length;
    client.send({ type: "prompt", content: "fail 429" });
    const failover = await client.waitFor((m) => m.type === "agent.failover" && client.received.indexOf(m) >= from, 60_000, "agent.failover");
    expect(failover).toMatchObject({ from: "dev/echo", to: "dev/echo-backup", reason: "rate_limit" });
    await client.waitFor((m) => m.type === "message.finalize" && m.text === "echo: fail 429" && m.reason === "end_turn" && client.received.indexOf(m) >= from, 60_000, "the backup model's answer");
    await poll(() => runtime.deps.prompts.list(id), {
      until: (prompts) => prompts.map((p) => p.status).join() === "completed",
      message: (prompts) => `the prompt completed; got ${JSON.stringify(prompts.map((p) => p.status))}`,
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    // Nothing of a key in the session's view.
    expect(JSON.stringify((await api.request("GET", `/v1/sessions/${id}`)).body)).not.toContain(MODEL_KEY);
  });
});
