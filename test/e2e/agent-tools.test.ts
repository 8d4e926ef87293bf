/**
 * The agent's own tools end to end (issue 25 §4) on the local runtime: real sockets, the real
 * local provider with real OpenCode, the real boot and sidecar. The development model calls a
 * tool on a `/tool <name> <json>` prompt line, so every call here is made by OpenCode itself:
 * OpenCode runs the tool file, the tool calls the sidecar's Unix socket, the sidecar calls the
 * control plane with an access token signed by the sandbox key, and the tool's answer comes back
 * to the model, whose final text (`tool <name> answered: ...`) the test reads.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { readSandboxRecord } from "../../functions/providers/local/sandbox-registry";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";
import { useOpenCodeHostTmp } from "../support/opencode-host-tmp";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { TestWsClient, type ServerMessage } from "../support/ws-client";

let runtime: LocalRuntime;
let api: ApiClient;
const clients: TestWsClient[] = [];
const DATABASE_URL = "postgres://app:agent-tools@db:5432/app";

// Sandboxes under a directory with its own `.opencode/` (test/support/opencode-host-tmp.ts says why).
let hostTmp: ReturnType<typeof useOpenCodeHostTmp> | null = null;

beforeAll(async () => {
  hostTmp = useOpenCodeHostTmp("agent-tools-host");
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2" } }));
  expect((await api.request("PUT", "/v1/secrets/DATABASE_URL", { body: { value: DATABASE_URL } })).status).toBe(200);
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime, clients));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await runtime?.close();
  hostTmp?.restore();
});

async function runningSession(body: Record<string, unknown>): Promise<{ id: string; client: TestWsClient }> {
  const res = await api.request("POST", "/v1/sessions", { body });
  expect(res.status, res.text).toBe(201);
  const id = (res.body as { session: { id: string } }).session.id;
  const client = await TestWsClient.connect(runtime.wsUrl, { sessionId: id, token: runtime.devApiToken });
  clients.push(client);
  await client.waitFor((m) => m.type === "status" && m.status === "running", 180_000, "running");
  return { id, client };
}

/** Prompts the agent to call `tool` with `args`; the model's final text after the tool answered. */
async function callTool(client: TestWsClient, tool: string, args: unknown): Promise<string> {
  client.send({ type: "prompt", content: `/tool ${tool} ${JSON.stringify(args)}` });
  const prefix = `tool ${tool} answered: `;
  const done = await client.waitFor(
    (m) => m.type === "message.finalize" && typeof m.text === "string" && m.text.startsWith(prefix) && !answered.has(m),
    180_000,
    `the answer of ${tool}`,
  );
  answered.add(done);
  return String(done.text).slice(prefix.length);
}
const answered = new Set<ServerMessage>();

async function events(id: string): Promise<{ flow: string; outcome: string; actor: string; message: string | null; snapshotId?: string | null }[]> {
  return ((await api.request("GET", `/v1/sessions/${id}/events?limit=100`)).body as { items: never[] }).items;
}

/** One `it` per tool call or two: each waits on a real OpenCode turn, slow on a loaded CI machine. */
const STEP_TIMEOUT_MS = 240_000;

describe("the agent's own tools, called by the real OpenCode agent (one coding session)", () => {
  let coding: Promise<{ id: string; client: TestWsClient }> | undefined;
  const codingSession = () => (coding ??= runningSession({ title: "agent tools" }));

  it("save_snapshot runs the snapshot flow and answers with the id it committed", async () => {
    const { id, client } = await codingSession();
    const saved = await callTool(client, "save_snapshot", { message: "after setup" });
    const snapshotId = /^Snapshot saved: (\S+)$/.exec(saved)?.[1];
    expect(snapshotId, saved).toBeTruthy();
    const session = await storedSession(runtime, id);
    expect(session.status).toBe("running");
    expect(session.snapshotId).toBe(snapshotId);
    const flow = (await events(id)).find((e) => e.flow === "snapshot");
    expect(flow).toMatchObject({ outcome: "committed", actor: "agent", snapshotId });
  }, STEP_TIMEOUT_MS);

  it("request_env_variables asks the clients and logs it, and a bad request is refused naming the field", async () => {
    const { id, client } = await codingSession();
    const asked = await callTool(client, "request_env_variables", {
      keys: [{ name: "STRIPE_KEY", description: "payments sandbox key" }, { name: "DATABASE_URL" }],
      reason: "to run the app's tests",
    });
    expect(asked).toContain("Asked the user for STRIPE_KEY");
    expect(asked).toContain("Already available as organization secrets: DATABASE_URL.");
    const frame = await client.waitFor((m) => m.type === "env.requested", 10_000, "env.requested");
    expect(frame).toMatchObject({
      keys: [
        { name: "STRIPE_KEY", required: true, description: "payments sandbox key", available: false },
        { name: "DATABASE_URL", required: true, description: null, available: true },
      ],
      reason: "to run the app's tests",
    });
    const logged = (await events(id)).find((e) => e.flow === "agent:request_env_variables");
    expect(logged).toMatchObject({ outcome: "committed", actor: "agent" });
    expect(logged?.message).toContain("STRIPE_KEY");
    // A value never travels with a request, and the secret's value is in no frame or event.
    expect(JSON.stringify([...client.received, await events(id)])).not.toContain(DATABASE_URL);

    // The sandbox is untrusted: a bad request is refused naming the field, and the agent is told.
    const refused = await callTool(client, "request_env_variables", { keys: [{ name: "1BAD" }] });
    expect(refused).toContain("keys.0.name: must be an environment variable name");
    expect(client.received.filter((m) => m.type === "env.requested")).toHaveLength(1);
  }, STEP_TIMEOUT_MS);

  it("verify reports the evidence the agent put in a folder", async () => {
    const { id, client } = await codingSession();
    // The agent puts evidence in a folder (a real bash call), then reports it for review.
    const shell = "$ mkdir -p evidence/shots && printf ok > evidence/test.log";
    client.send({ type: "prompt", content: shell });
    await client.waitFor((m) => m.type === "message.finalize" && m.text === `echo: ${shell}`, 180_000, "the evidence written");
    const verified = await callTool(client, "verify", { folder: "evidence", summary: "the tests pass" });
    expect(verified).toMatch(/^Reported to the user for review \(verification agt_\S+\)\. Evidence in evidence: test\.log \(2 bytes\)\. Services: none\.$/);
    const report = await client.waitFor((m) => m.type === "verification.reported", 10_000, "verification.reported");
    expect(report).toMatchObject({ folder: "evidence", summary: "the tests pass", files: [{ path: "test.log", bytes: 2 }], truncated: false, services: [] });
    expect((await events(id)).find((e) => e.flow === "agent:verify")?.message).toBe("verification reported: 1 evidence file(s) in evidence; services: none");
  }, STEP_TIMEOUT_MS);

  it("a coding session has no setup-only tools: OpenCode itself refuses the call", async () => {
    const { id, client } = await codingSession();
    const missing = await callTool(client, "save_service_commands", { commands: [{ name: "web", command: "npm start" }] });
    expect(missing).not.toMatch(/^Saved/);
    expect((await storedSession(runtime, id)).serviceCommands).toEqual([]);
  }, STEP_TIMEOUT_MS);
});

describe("the setup-only tools, called by the real OpenCode agent (one setup session)", () => {
  const commands = [{ name: "web", command: "echo up > web-started.txt; exec sleep 600" }];
  let setup: Promise<{ id: string; client: TestWsClient }> | undefined;
  const setupSession = () => (setup ??= runningSession({ title: "setup", sessionType: "setup" }));

  it("save_service_commands and save_env_files are saved on the session; a path leaving the workspace is refused", async () => {
    const { id, client } = await setupSession();
    expect(await callTool(client, "save_service_commands", { commands })).toBe(
      "Saved 1 service command(s) (web) to the session: they start at every boot from now on.",
    );
    expect(await callTool(client, "save_env_files", { files: [{ path: ".env", keys: [{ name: "DATABASE_URL" }] }] })).toBe(
      "Saved 1 env file(s) (.env) to the session: they are generated at every boot from now on.",
    );
    // Refused as the API refuses it: a path leaving the workspace.
    expect(await callTool(client, "save_env_files", { files: [{ path: "../outside/.env", keys: [{ name: "X" }] }] })).toContain("files.0.path");

    const saved = await storedSession(runtime, id);
    expect(saved.serviceCommands).toEqual(commands);
    expect(saved.envFiles).toEqual([{ path: ".env", format: "dotenv", keys: [{ name: "DATABASE_URL", required: true }] }]);
    expect((await events(id)).map((e) => e.flow)).toEqual(expect.arrayContaining(["agent:save_service_commands", "agent:save_env_files"]));
  }, STEP_TIMEOUT_MS);

  it("the next boot (pause, then resume from the snapshot) starts the saved service and writes the env file", async () => {
    const { id } = await setupSession();
    expect((await storedSession(runtime, id)).serviceCommands).toEqual(commands);
    expect((await api.request("POST", `/v1/sessions/${id}/pause`)).status).toBe(202);
    await waitFor("paused", async () => (await storedSession(runtime, id)).status === "paused", 180_000);
    expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
    const resumed = await waitFor(
      "running again",
      async () => {
        const s = await storedSession(runtime, id);
        return s.status === "running" && s.sandboxId ? s : null;
      },
      180_000,
    );
    const sandbox = await readSandboxRecord(runtime.sandboxDir, String(resumed.sandboxId));
    if (!sandbox) throw new Error(`no local sandbox ${String(resumed.sandboxId)}`);
    await waitFor("the saved service started", () => existsSync(join(sandbox.workspace, "web-started.txt")));
    await waitFor("the saved env file", () => existsSync(join(sandbox.workspace, ".env")));
    expect(readFileSync(join(sandbox.workspace, ".env"), "utf8")).toContain(`DATABASE_URL=${DATABASE_URL}`);
  }, STEP_TIMEOUT_MS);
});

describe("the contract", () => {
  it("describes every frame the server sent in this file's tests (env.requested, verification.reported), field for field", () => {
    expect(TestWsClient.contractIssues).toEqual([]);
  });
});
