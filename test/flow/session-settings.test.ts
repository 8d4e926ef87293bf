/**
 * Session settings reach every sandbox of a session (issue 23), through the real ASL files and
 * the real provision step over dynalite: the create call carries the session's settings, and its
 * env vars hold exactly what the boot needs (SESSION_ID, the sandbox key, the model key when an
 * org secret names it) and nothing more. Model resolution: session over org over the deployment
 * default; a deleted key secret fails the provision naming the secret, never its value.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentModel } from "../../functions/domain/agent-settings";
import { DynamoOrgSettingsStore } from "../../functions/store/dynamo-org-settings";
import { toSessionView } from "../../functions/domain/session";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import { deriveSandboxKey } from "../../sandbox/shared/access-token";
import { startFlowHarness, TEST_MASTER_KEY, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

const ANTHROPIC_KEY = "sk-ant-api03-session-settings-test-key";
const OPENAI_KEY = "sk-proj-org-default-key-0123456789";

let inner: InstantSandboxProvider;
let h: FlowHarness;
let orgSettings: DynamoOrgSettingsStore;

beforeEach(async () => {
  inner = new InstantSandboxProvider({});
  h = await startFlowHarness({ provider: inner, agent: new ScriptedAgent(), env: { CONTROL_PLANE_URL: "https://api.example.test", SANDBOX_GIT_PULL_ON_RESTORE: "true", SANDBOX_GIT_PULL_CADENCE_SECONDS: "600" } });
  orgSettings = new DynamoOrgSettingsStore(h.table.doc, h.table.tableName);
  const now = new Date();
  await h.deps.secrets.put({ orgId: "org_1", name: "ANTHROPIC_KEY", value: ANTHROPIC_KEY, now });
  await h.deps.secrets.put({ orgId: "org_1", name: "OPENAI_KEY", value: OPENAI_KEY, now });
});
afterEach(async () => {
  await h.close();
});

const SETTINGS = {
  orgId: "org_1",
  repos: [{ url: "https://github.com/acme/app.git", credential: "GIT_TOKEN", ref: "v1.0.0" }],
  model: { id: "anthropic/claude-sonnet-4-5", apiKeySecret: "ANTHROPIC_KEY" } satisfies AgentModel,
  systemPrompt: "Be brief.",
  serviceCommands: [{ name: "web", command: "npm run dev" }],
  sshPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBexample me@laptop",
  triggerContext: { source: "automation", automationId: "aut_1" },
  gitIdentity: { name: "Ada", email: "ada@example.test" },
};

describe("session settings in the create call", () => {
  it("every sandbox (first boot and resume) gets the settings, and exactly SESSION_ID, the sandbox key and the model key", async () => {
    const s = await h.createSession(SETTINGS);
    await h.run("ensure-runtime", s.id);
    await h.run("pause", s.id);
    await h.run("ensure-runtime", s.id);
    expect(inner.createCalls).toHaveLength(2);
    for (const call of inner.createCalls) {
      // Native pause: the resumed sandbox keeps its processes, so its key epoch (issue 14 §2).
      expect(call.envVars).toEqual({ SESSION_ID: s.id, SIDECAR_TOKEN: deriveSandboxKey(TEST_MASTER_KEY, s.id, 1), ANTHROPIC_API_KEY: ANTHROPIC_KEY });
      expect(call).toMatchObject({
        repos: SETTINGS.repos,
        agentConfig: { modelId: "anthropic/claude-sonnet-4-5" },
        systemPrompt: "Be brief.",
        serviceCommands: SETTINGS.serviceCommands,
        autoStartServices: true,
        sshPublicKey: SETTINGS.sshPublicKey,
        triggerContext: SETTINGS.triggerContext,
        gitIdentity: SETTINGS.gitIdentity,
        controlPlaneUrl: "https://api.example.test",
        gitFreshness: { enabled: true, cadenceSeconds: 600 },
      });
    }
    // The key is in the create call only: not on the session, not in its events.
    const stored = JSON.stringify([await h.session(s.id), (await h.deps.events.list(s.id, { limit: 100 })).items]);
    expect(stored).not.toContain(ANTHROPIC_KEY);
  });

  it("the org's model applies when the session names none; the session's wins over it", async () => {
    await orgSettings.putModel("org_1", { id: "openai/gpt-5", apiKeySecret: "OPENAI_KEY" }, new Date());
    const byOrg = await h.createSession({ orgId: "org_1" });
    await h.run("ensure-runtime", byOrg.id);
    const own = await h.createSession(SETTINGS);
    await h.run("ensure-runtime", own.id);
    const [orgCall, ownCall] = inner.createCalls;
    expect(orgCall?.agentConfig).toEqual({ modelId: "openai/gpt-5" });
    expect(orgCall?.envVars.OPENAI_API_KEY).toBe(OPENAI_KEY);
    expect(orgCall?.envVars.ANTHROPIC_API_KEY).toBeUndefined();
    expect(ownCall?.agentConfig).toEqual({ modelId: "anthropic/claude-sonnet-4-5" });
    expect(ownCall?.envVars.OPENAI_API_KEY).toBeUndefined();
  });

  it("every model of the failover chain gets its provider's key: a fallback's own secret, the main model's for its provider, else the deployment's (seed 004)", async () => {
    const s = await h.createSession({
      ...SETTINGS,
      fallbackModels: ["anthropic/claude-haiku-4-5", "openai/gpt-4o", "google/gemini-2.5-pro"],
      fallbackKeySecrets: { "openai/gpt-4o": "OPENAI_KEY" },
    });
    await h.run("ensure-runtime", s.id);
    const call = inner.createCalls[0];
    expect(call?.envVars).toEqual({ SESSION_ID: s.id, SIDECAR_TOKEN: deriveSandboxKey(TEST_MASTER_KEY, s.id, 1), ANTHROPIC_API_KEY: ANTHROPIC_KEY, OPENAI_API_KEY: OPENAI_KEY });
    // Google's key is the deployment's: the provider adds it (deploymentModelEnv) for the listed fallback.
    expect(call?.agentConfig).toEqual({ modelId: "anthropic/claude-sonnet-4-5", fallbackModelIds: ["anthropic/claude-haiku-4-5", "openai/gpt-4o", "google/gemini-2.5-pro"] });
    expect(JSON.stringify(await h.session(s.id))).not.toContain(OPENAI_KEY);
  });

  it("a fallback's key secret deleted since the session was created fails the provision with its name", async () => {
    const s = await h.createSession({ ...SETTINGS, fallbackModels: ["openai/gpt-4o"], fallbackKeySecrets: { "openai/gpt-4o": "OPENAI_KEY" } });
    await h.deps.secrets.delete("org_1", "OPENAI_KEY");
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed.status).toBe("error");
    expect(failed.errorMessage).toContain('the model key secret "OPENAI_KEY" no longer exists');
    expect(inner.createCalls).toEqual([]);
  });

  it("no model anywhere: no agent config and no key (the provider applies the deployment default)", async () => {
    const s = await h.createSession({ orgId: "org_1" });
    await h.run("ensure-runtime", s.id);
    const call = inner.createCalls[0];
    expect(call?.agentConfig).toBeUndefined();
    expect(Object.keys(call?.envVars ?? {}).sort()).toEqual(["SESSION_ID", "SIDECAR_TOKEN"]);
    expect(call?.autoStartServices).toBe(false);
  });

  it("a key secret deleted since the session was created fails the provision with its name, and leaves no sandbox", async () => {
    const s = await h.createSession(SETTINGS);
    await h.deps.secrets.delete("org_1", "ANTHROPIC_KEY");
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed.status).toBe("error");
    expect(failed.errorMessage).toContain('the model key secret "ANTHROPIC_KEY" no longer exists');
    expect(inner.createCalls).toEqual([]);
    expect(inner.live()).toEqual([]);
  });
});

describe("preview URL (issue 25 §7)", () => {
  it("the provider's preview URL lands on the session and in its view while running, never the agent tunnel", async () => {
    await h.close();
    inner = new InstantSandboxProvider({ previewUrl: "https://preview.instant.invalid", tunnelUrl: "https://agent-tunnel.instant.invalid" });
    h = await startFlowHarness({ provider: inner, agent: new ScriptedAgent() });
    const s = await h.createSession({ orgId: "org_1" });
    await h.run("ensure-runtime", s.id);
    const running = await h.session(s.id);
    expect(running.previewUrl).toBe("https://preview.instant.invalid");
    expect(toSessionView(running, new Date()).preview).toEqual({ url: "https://preview.instant.invalid" });
    expect(JSON.stringify(toSessionView(running, new Date()))).not.toContain("agent-tunnel");
    await h.run("pause", s.id);
    expect(toSessionView(await h.session(s.id), new Date()).preview).toBeNull();
  });
  it("a client connected before the session runs gets the preview with the running status, after start and after a migration (the new sandbox's)", async () => {
    await h.close();
    inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false, previewUrl: (sandboxId) => `https://${sandboxId}.preview.invalid`, tunnelUrl: "https://agent-tunnel.instant.invalid" });
    h = await startFlowHarness({ provider: inner, agent: new ScriptedAgent(), env: { MIGRATION_TURN_WAIT_SECONDS: "0.3" } });
    const s = await h.createSession({ orgId: "org_1", clientType: "web" });
    // Connected while the session is not running: its init (toSessionView) said preview null.
    expect(toSessionView(s, new Date()).preview).toBeNull();
    const client = await h.addClient(s.id);
    await h.run("ensure-runtime", s.id);
    const first = (await h.session(s.id)).sandboxId ?? "";
    const fired = await makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    expect(fired.started).toMatch(/^migrate-/);
    await h.runner.whenIdle();
    const second = (await h.session(s.id)).sandboxId ?? "";
    expect(second).not.toBe(first);
    const statuses = h.push.sent.filter((f) => f.connectionId === client && f.message.type === "status").map((f) => f.message);
    expect(statuses).toEqual([
      { type: "status", status: "creating" },
      { type: "status", status: "running", preview: { url: `https://${first}.preview.invalid` } },
      { type: "status", status: "migrating", message: "Extending session..." },
      { type: "status", status: "running", preview: { url: `https://${second}.preview.invalid` } },
    ]);
    expect(JSON.stringify(h.push.sent)).not.toContain("agent-tunnel");
  });
});
