/**
 * The streaming relay end to end against real OpenCode and the development model in one local
 * sandbox (terminated in afterAll even on failure), over dynalite: a prompt goes out through the
 * prompt queue, the relay streams the turn into a recording push (deltas that concatenate to
 * the echo, tool updates, finalize), persists both sides of the transcript, records the agent's
 * idle boundary and completes the turn. The sandbox has a sandbox key, so its OpenCode requires
 * the password derived from it: every call here goes through the session's agent endpoint.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import { OpenCodeAgentClient } from "../../functions/agent/opencode-agent-client";
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import type { AgentEndpoint } from "../../functions/ports/agent-client";
import { SANDBOX_KEY_ENV } from "../../sandbox/shared/access-token";
import type { SessionRecord } from "../../functions/domain/session";
import { submitPrompt } from "../../functions/services/submit-prompt";
import { createLogger } from "../../functions/observability/logger";
import type { FlowRunner } from "../../functions/ports/flow-runner";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { OpenCodeMessageReader } from "../../functions/relay/agent-messages";
import { StreamingRelay } from "../../functions/relay/relay";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoConnectionRegistry, DynamoPromptQueue } from "../../functions/store/dynamo-session-items";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { buildSession } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";
import { parseConfig } from "../../functions/config/config";
import type { LifecycleScheduler } from "../../functions/ports/lifecycle-scheduler";

/** This test is about streaming: idle checks it arms go nowhere. */
const noSchedules: LifecycleScheduler = { arm: () => Promise.resolve(), cancel: () => Promise.resolve() };
import { RecordingPush } from "../support/recording-push";
import { waitFor } from "../support/wait-for";

const TIMEOUT = 120_000;
const CONNECTION = "conn-relay-adapter";

let dataDir: string;
let provider: LocalSandboxProvider;
let sandboxId: string | null = null;
let table: TestTable;
let relay: StreamingRelay | null = null;
let session: SessionRecord;
const push = new RecordingPush();
const agent = new OpenCodeAgentClient();
const logger = createLogger("relay-adapter-test");
const sandboxKeys = staticKeyring("relay-opencode-test-master-key-0123456789");
let endpoint: AgentEndpoint;
/** Nothing here wakes a session: a flow start would be a bug. */
const noFlows: FlowRunner = { start: () => Promise.reject(new Error("no lifecycle flow expected")) };

let sessions: DynamoSessionStore;
let prompts: DynamoPromptQueue;
let transcript: DynamoTranscriptStore;

/** A relay over this test's table and OpenCode; scans only when asked (`scanNow`). */
function adapterRelay(ownerId: string): StreamingRelay {
  return new StreamingRelay(
    {
      sessions,
      prompts,
      flows: noFlows,
      agent,
      sandboxKeys,
      connections: new DynamoConnectionRegistry(table.doc, table.tableName),
      push,
      transcript,
      relayLeases: new DynamoRelayLeaseStore(table.doc, table.tableName),
      scheduler: noSchedules,
      config: parseConfig({ TABLE_NAME: table.tableName }),
      logger,
      now: () => new Date(),
    },
    { ownerId, scanIntervalMs: 60_000 },
  );
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "relay-opencode-"));
  table = await startTestTable();
  sessions = new DynamoSessionStore(table.doc, table.tableName);
  prompts = new DynamoPromptQueue(table.doc, table.tableName);
  transcript = new DynamoTranscriptStore(table.doc, table.tableName);
  const connections = new DynamoConnectionRegistry(table.doc, table.tableName);

  const draft = buildSession({ status: "running" });
  provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
  const sandbox = await provider.createSandbox({ sessionId: draft.id, repos: [], envVars: { [SANDBOX_KEY_ENV]: await sandboxKeys.sandboxKey(draft.id) } });
  sandboxId = sandbox.sandboxId;
  endpoint = await agentEndpoint(sandboxKeys, draft.id, sandbox.tunnelUrl);
  // The sandbox's OpenCode has the password: nothing gets in without it.
  expect((await fetch(`${sandbox.tunnelUrl}/session`)).status).toBe(401);
  const agentSessionId = await agent.ensureSession(endpoint);
  session = { ...draft, sandboxId: sandbox.sandboxId, openCodeUrl: sandbox.tunnelUrl, codingAgentSessionId: agentSessionId, lastActivityAt: new Date().toISOString() };
  await sessions.createSession(session);
  await connections.add({ connectionId: CONNECTION, sessionId: session.id, userId: "user-a", clientType: "web", connectedAt: new Date().toISOString(), ready: true });

  relay = adapterRelay("relay-adapter");
  await relay.scanNow();
  const live = relay;
  await waitFor(() => live.streamCounters().open === 1, { message: "relay stream live", timeoutMs: 30_000 });
}, TIMEOUT);

afterAll(async () => {
  await relay?.drain().catch(() => undefined);
  if (sandboxId) await new LocalSandboxProvider({ dataDir }).terminate(session.id, sandboxId).catch(() => undefined);
  await table?.close();
  await rm(dataDir, { recursive: true, force: true });
}, TIMEOUT);

function messagesOfTurn(from: number) {
  return push.sent.slice(from).filter((s) => s.connectionId === CONNECTION).map((s) => s.message);
}

async function runTurn(content: string): Promise<{ type: string; [k: string]: unknown }[]> {
  const from = push.sent.length;
  const current = await sessions.getSession(session.id);
  if (!current) throw new Error("session vanished");
  const relayLeases = new DynamoRelayLeaseStore(table.doc, table.tableName);
  const submitted = await submitPrompt({ sessions, prompts, flows: noFlows, agent, sandboxKeys, relayLeases, now: () => new Date(), logger }, current, { content, source: "user:test" });
  expect(submitted.status).toBe("processing");
  await waitFor(async () => (await prompts.list(session.id)).every((p) => p.status === "completed"), { message: "turn completed", timeoutMs: 60_000 });
  return messagesOfTurn(from);
}

describe("StreamingRelay against real OpenCode", () => {
  it("streams an echo turn: create, deltas that concatenate to the echo, finalize; transcript has both sides", async () => {
    const turn = await runTurn("hello relay");
    const answer = turn.find((m) => m.type === "message.finalize" && m.text === "echo: hello relay");
    expect(answer).toBeDefined();
    const messageId = answer?.messageId;
    const ofAnswer = turn.filter((m) => m.messageId === messageId);
    expect(ofAnswer[0]).toEqual({ type: "message.create", messageId, role: "assistant" });
    expect(ofAnswer.at(-1)).toEqual({ type: "message.finalize", messageId, text: "echo: hello relay", reason: "end_turn" });
    const deltas = ofAnswer.filter((m) => m.type === "message.part.text-delta").map((m) => String(m.delta));
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("echo: hello relay");

    const stored = (await transcript.list(session.id, { limit: 50 })).items;
    expect(stored.map((m) => [m.role, m.text])).toEqual([
      ["user", "hello relay"],
      ["assistant", "echo: hello relay"],
    ]);
    expect(stored[1]?.completedAt).not.toBeNull();
    const after = await sessions.getSession(session.id);
    expect(after?.agentBusy).toBe(false);
    expect(after?.lastKnownAgentIdleAt).not.toBeNull();
  }, TIMEOUT);

  it("streams a tool turn: tool updates end completed, then the answer; the transcript grows by that turn only", async () => {
    const turn = await runTurn("please sleep 1s");
    const toolStatuses = turn.filter((m) => m.type === "message.part.tool-update").map((m) => m.status);
    expect(toolStatuses.at(-1)).toBe("completed");
    expect(toolStatuses).toContain("running");
    expect(turn.filter((m) => m.type === "message.finalize").map((m) => m.text)).toContain("echo: please sleep 1s");

    const stored = (await transcript.list(session.id, { limit: 50 })).items;
    expect(stored.filter((m) => m.role === "user").map((m) => m.text)).toEqual(["hello relay", "please sleep 1s"]);
    expect(stored.at(-1)?.text).toBe("echo: please sleep 1s");
    expect(stored.some((m) => m.parts.some((p) => p.type === "tool" && p.tool === "bash" && p.status === "completed"))).toBe(true);
  }, TIMEOUT);

  it("a successor relay's catch-up from OpenCode's stored messages leaves the transcript exactly as it was", async () => {
    const listed = await new OpenCodeMessageReader().listMessages(endpoint, session.codingAgentSessionId ?? "");
    expect(listed.filter((m) => m.info.role === "user")).toHaveLength(2);
    expect(listed.filter((m) => m.info.role === "assistant").every((m) => m.info.time.completed !== undefined)).toBe(true);

    const before = (await transcript.list(session.id, { limit: 50 })).items;
    await relay?.drain();
    const successor = adapterRelay("relay-successor");
    relay = successor;
    await successor.scanNow();
    await waitFor(() => successor.streamCounters().open === 1, { message: "successor stream live", timeoutMs: 30_000 });
    expect((await transcript.list(session.id, { limit: 50 })).items).toEqual(before);
  }, TIMEOUT);
});
