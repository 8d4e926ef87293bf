/**
 * Contract between our OpenCode client (functions/agent/opencode-agent-client.ts, built on
 * `@opencode-ai/sdk`) and the `opencode serve` it talks to: the real binary of the pinned
 * `opencode-ai` version, run offline by the local provider (development model, unreachable
 * registries, server password from the sandbox key). An OpenCode upgrade that moves a route, renames a
 * field the client reads, changes the event stream or drops the password check fails here
 * instead of in production. test/unit/opencode-sdk-version.test.ts keeps the SDK and the server
 * at the same version; test/adapter/opencode-agent-client.test.ts covers the finer behaviour.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { agentEndpointForKey } from "../../functions/agent/agent-endpoint";
import { OpenCodeAgentClient, OpenCodeApi } from "../../functions/agent/opencode-agent-client";
import type { AgentEndpoint, AgentEvent } from "../../functions/ports/agent-client";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { OpenCodeMessageReader } from "../../functions/relay/agent-messages";
import { deriveSandboxKey, SANDBOX_KEY_ENV } from "../../sandbox/shared/access-token";

const TIMEOUT = 120_000;
const SESSION = "ses_sdkcontract";
const SANDBOX_KEY = deriveSandboxKey("sdk-contract-test-master-key-0123456789", SESSION);
const REPO_ROOT = join(import.meta.dirname, "..", "..");

/** Every route and method the client and the message reader call, as OpenCode's OpenAPI document names them. */
const ROUTES_USED: [string, string][] = [
  ["/session", "post"],
  ["/session/{sessionID}", "get"],
  ["/session/status", "get"],
  ["/session/{sessionID}/prompt_async", "post"],
  ["/session/{sessionID}/abort", "post"],
  ["/session/{sessionID}/revert", "post"],
  ["/session/{sessionID}/message", "get"],
  ["/event", "get"],
];

const OpenApiDocument = z.object({ openapi: z.string(), paths: z.record(z.string(), z.record(z.string(), z.unknown())) });
const Health = z.object({ healthy: z.literal(true), version: z.string() });

let dataDir: string;
let sandboxId: string | null = null;
let endpoint: AgentEndpoint;
const client = new OpenCodeAgentClient();
const api = new OpenCodeApi();

/** Reads `client.events` until `stop` matches (inclusive) or the bound passes; aborts the stream either way. */
async function eventsUntil(stop: (e: AgentEvent) => boolean, timeoutMs: number, started: () => Promise<void>): Promise<AgentEvent[]> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const seen: AgentEvent[] = [];
  try {
    for await (const event of client.events(endpoint, controller.signal)) {
      seen.push(event);
      // Act once the stream is live, so nothing the action causes is missed.
      if (event.type === "server.connected") await started();
      if (stop(event)) break;
    }
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  if (!seen.some(stop)) throw new Error(`no matching event in ${timeoutMs} ms; saw ${seen.map((e) => e.type).join(", ")}`);
  return seen;
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "sdk-contract-"));
  const provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
  const sandbox = await provider.createSandbox({ sessionId: SESSION, repos: [], envVars: { [SANDBOX_KEY_ENV]: SANDBOX_KEY } });
  sandboxId = sandbox.sandboxId;
  endpoint = agentEndpointForKey(sandbox.tunnelUrl, SANDBOX_KEY);
}, TIMEOUT);

afterAll(async () => {
  if (sandboxId) await new LocalSandboxProvider({ dataDir }).terminate(SESSION, sandboxId).catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
}, TIMEOUT);

describe("@opencode-ai/sdk against the pinned opencode serve", () => {
  it("the server is the version the SDK was generated from", async () => {
    const sdk = JSON.parse(await readFile(join(REPO_ROOT, "node_modules/@opencode-ai/sdk/package.json"), "utf8")) as { version: string };
    const health = api.parse("health", await api.call("health", endpoint, (o, { sdk }) => sdk.global.health(o)), Health);
    expect(health.version).toBe(sdk.version);
  });

  it("the server's OpenAPI document still has every route the client calls", async () => {
    const answer = await api.call("doc", endpoint, (o, { http }) => http.get({ url: "/doc", ...o }));
    const doc = api.parse("doc", answer, OpenApiDocument);
    const missing = ROUTES_USED.filter(([path, method]) => !doc.paths[path]?.[method]);
    expect(missing).toEqual([]);
  });

  it("ensureSession creates a session and keeps it; a prompt streams over SSE to session.idle; the reader lists the turn", async () => {
    const sessionId = await client.ensureSession(endpoint);
    expect(sessionId).toMatch(/^ses_/);
    expect(await client.ensureSession(endpoint, sessionId)).toBe(sessionId);

    const events = await eventsUntil(
      (e) => e.type === "session.idle" && e.properties.sessionID === sessionId,
      60_000,
      () => client.promptAsync(endpoint, sessionId, "hello contract"),
    );
    const mine = events.filter((e) => e.properties.sessionID === sessionId);
    const deltas = mine.filter((e) => e.type === "message.part.delta").map((e) => String(e.properties.delta));
    expect(deltas.join("")).toContain("echo: hello contract");
    expect(mine.map((e) => e.type)).toContain("message.updated");
    expect(await client.isBusy(endpoint, sessionId)).toBe(false);

    const messages = await new OpenCodeMessageReader().listMessages(endpoint, sessionId);
    expect(messages.map((m) => m.info.role)).toEqual(["user", "assistant"]);
    expect(messages[1]?.parts.map((p) => p.text ?? "").join("")).toContain("echo: hello contract");
  }, TIMEOUT);

  it("abort ends a busy turn: busy while the tool runs, idle after", async () => {
    const sessionId = await client.ensureSession(endpoint);
    const events = await eventsUntil(
      (e) => e.type === "session.idle" && e.properties.sessionID === sessionId,
      30_000,
      async () => {
        await client.promptAsync(endpoint, sessionId, "please sleep 3s");
        expect(await client.isBusy(endpoint, sessionId)).toBe(true);
        await client.abort(endpoint, sessionId);
      },
    );
    expect(events.filter((e) => e.type === "session.idle" && e.properties.sessionID === sessionId)).toHaveLength(1);
    expect(await client.isBusy(endpoint, sessionId)).toBe(false);
    const messages = await new OpenCodeMessageReader().listMessages(endpoint, sessionId);
    expect(messages.map((m) => m.parts.map((p) => p.text ?? "").join("")).join("\n")).not.toContain("echo: please sleep 3s");
  }, TIMEOUT);

  it("every route the client calls needs the password: 401 without it, the event stream included", async () => {
    const none: AgentEndpoint = { url: endpoint.url, authorization: null };
    for (const [url, method] of ROUTES_USED) {
      const answer = await api.call("unauthenticated", none, (o, { http }) =>
        http.request({ method: method.toUpperCase() as "GET" | "POST", url, path: { sessionID: "ses_x" }, parseAs: "stream", ...o }),
      );
      expect(answer.status, `${method} ${url}`).toBe(401);
    }
    // And the client maps it to a non-retryable error (every operation: test/adapter/opencode-agent-client.test.ts).
    await expect(client.isBusy(none, "ses_x")).rejects.toMatchObject({ name: "AgentUnavailableError", retryable: false, context: { httpStatus: 401 } });
  });
});
