import { describe, expect, it } from "vitest";
import { chainKeyConflict, chainKeys, fallbackChain, fallbackKeySecrets, gitIdentityFor, modelKeyEnv, resolveModel } from "../../functions/domain/agent-settings";
import { deploymentModelEnv } from "../../functions/providers/sandbox-boot";
import { CreateSessionBody } from "../../functions/http/handlers/create-session";
import { describeZodError } from "../../functions/http/http-handler";

const reject = (body: unknown): string => {
  const parsed = CreateSessionBody.safeParse(body);
  if (parsed.success) throw new Error(`accepted ${JSON.stringify(body)}`);
  return describeZodError(parsed.error, "body");
};

describe("resolveModel: session over org over the deployment default", () => {
  const org = { id: "openai/gpt-5", apiKeySecret: "OPENAI_KEY" };
  it("picks the session's, else the org's, with the provider's key variable", () => {
    expect(resolveModel({ id: "anthropic/claude-sonnet-4-5", apiKeySecret: "A" }, org)).toEqual({ source: "session", modelId: "anthropic/claude-sonnet-4-5", keyEnv: "ANTHROPIC_API_KEY", keySecret: "A" });
    expect(resolveModel(null, org)).toEqual({ source: "org", modelId: "openai/gpt-5", keyEnv: "OPENAI_API_KEY", keySecret: "OPENAI_KEY" });
    expect(resolveModel(null, { id: "google/gemini-2.5-pro" })).toEqual({ source: "org", modelId: "google/gemini-2.5-pro", keyEnv: "GOOGLE_GENERATIVE_AI_API_KEY", keySecret: null });
    expect(resolveModel(null, null)).toEqual({ source: "default" });
  });
  it("knows the development model's variable and no unknown provider's", () => {
    expect(modelKeyEnv("dev/echo")).toBe("DEV_MODEL_API_KEY");
    expect(modelKeyEnv("acme/x")).toBeNull();
  });
});

describe("gitIdentityFor", () => {
  it("the user id as name and a no-reply address, or the profile's own", () => {
    expect(gitIdentityFor({ userId: "slack:T1:U2" })).toEqual({ name: "slack:T1:U2", email: "slack-T1-U2@users.noreply.sandbox.invalid" });
    expect(gitIdentityFor({ userId: "u", name: "Ada", email: "ada@x.test" })).toEqual({ name: "Ada", email: "ada@x.test" });
  });
});

describe("POST /v1/sessions settings: a 400 names the field", () => {
  it("model", () => {
    expect(reject({ model: { id: "nowhere/x" } })).toMatch(/^body\.model\.id: provider must be one of anthropic, openai/);
    expect(reject({ model: { id: "no-slash" } })).toMatch(/^body\.model\.id: must be provider\/model/);
    expect(reject({ model: { id: "anthropic/x", apiKeySecret: "bad name" } })).toMatch(/^body\.model\.apiKeySecret: must be a secret name/);
  });
  it("repos: credential names, refs, depth; credentials only on http(s)", () => {
    expect(reject({ repos: [{ url: "https://h/a.git", credential: "9LIVES" }] })).toMatch(/^body\.repos\.0\.credential: must be a secret name/);
    expect(reject({ repos: [{ url: "https://h/a.git", ref: "--upload-pack=x" }] })).toMatch(/^body\.repos\.0\.ref: /);
    expect(reject({ repos: [{ url: "https://h/a.git", depth: 0 }] })).toMatch(/^body\.repos\.0\.depth: /);
    expect(reject({ repos: [{ url: "file:///tmp/x", credential: "T" }] })).toBe("body.repos.0.credential: only http(s) repository URLs take a credential");
  });
  it("service commands, SSH key, trigger context, system prompt", () => {
    expect(reject({ serviceCommands: [{ name: "web", command: "a" }, { name: "web", command: "b" }] })).toBe("body.serviceCommands: service names must be unique");
    expect(reject({ serviceCommands: [{ name: "../x", command: "a" }] })).toMatch(/^body\.serviceCommands\.0\.name: /);
    expect(reject({ sshPublicKey: "ssh-ed25519 AAAA\nssh-rsa BBBB" })).toMatch(/^body\.sshPublicKey: must be one OpenSSH public key line/);
    expect(reject({ triggerContext: { blob: "x".repeat(20_000) } })).toBe("body.triggerContext: must be at most 16384 bytes of JSON");
    expect(reject({ systemPrompt: "   " })).toMatch(/^body\.systemPrompt: /);
    expect(reject({ envFiles: [{ path: ".env", keys: [{ name: "A", secret: "not valid" }] }] })).toMatch(/^body\.envFiles\.0\.keys\.0\.secret: /);
  });
  it("accepts a full, valid body", () => {
    const ok = CreateSessionBody.safeParse({
      repos: [{ url: "https://github.com/acme/app.git", credential: "GH", ref: "v1.0.0", depth: 50 }],
      model: { id: "anthropic/claude-sonnet-4-5", apiKeySecret: "ANTHROPIC_KEY" },
      systemPrompt: "Be brief.",
      serviceCommands: [{ name: "web", command: "npm run dev", cwd: "app" }],
      sshPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB me@laptop",
      triggerContext: { source: "automation" },
    });
    expect(ok.success, ok.success ? "" : describeZodError(ok.error, "body")).toBe(true);
  });
});

describe("failover chains: every model gets its provider's key (seed 004)", () => {
  it("fallbackModels take `provider/model` or `{id, apiKeySecret}`, each model once, known providers only", () => {
    const parsed = CreateSessionBody.parse({ fallbackModels: ["dev/echo-backup", { id: "openai/gpt-4o", apiKeySecret: "OPENAI_KEY" }] });
    expect(parsed.fallbackModels).toEqual([{ id: "dev/echo-backup" }, { id: "openai/gpt-4o", apiKeySecret: "OPENAI_KEY" }]);
    expect(reject({ fallbackModels: ["openai/gpt-4o", { id: "openai/gpt-4o" }] })).toContain("each model at most once");
    expect(reject({ fallbackModels: [{ id: "acme/model-1" }] })).toContain("provider must be one of");
    expect(reject({ fallbackModels: [{ id: "openai/gpt-4o", apiKeySecret: "not a name" }] })).toContain("body.fallbackModels");
  });

  it("chainKeys: one key per provider variable, the first model naming a secret gives it, none: the deployment's", () => {
    expect(
      chainKeys([{ id: "anthropic/claude-sonnet-4-5" }, { id: "openai/gpt-4o", apiKeySecret: "OPENAI_KEY" }, { id: "anthropic/claude-haiku-4-5", apiKeySecret: "ANTHROPIC_KEY" }, { id: "google/gemini-2.5-pro" }]),
    ).toEqual([
      { keyEnv: "ANTHROPIC_API_KEY", keySecret: "ANTHROPIC_KEY" },
      { keyEnv: "OPENAI_API_KEY", keySecret: "OPENAI_KEY" },
      { keyEnv: "GOOGLE_GENERATIVE_AI_API_KEY", keySecret: null },
    ]);
  });

  it("chainKeyConflict: two secrets for one provider's variable are refused, naming both models", () => {
    expect(chainKeyConflict([{ id: "openai/gpt-4o", apiKeySecret: "A" }, { id: "openai/gpt-5", apiKeySecret: "A" }, { id: "dev/echo" }])).toBeNull();
    expect(chainKeyConflict([{ id: "openai/gpt-4o", apiKeySecret: "A" }, { id: "openai/gpt-5", apiKeySecret: "B" }])).toBe(
      'openai/gpt-5 names key secret "B" but openai/gpt-4o names "A": models of provider openai share one key (OPENAI_API_KEY)',
    );
  });

  it("fallbackChain gives a session's fallbacks back their key secrets", () => {
    const models = [{ id: "dev/echo-backup" }, { id: "openai/gpt-4o", apiKeySecret: "OPENAI_KEY" }];
    expect(fallbackChain({ fallbackModels: models.map((m) => m.id), fallbackKeySecrets: fallbackKeySecrets(models) })).toEqual(models);
  });

  it("the deployment's key for each fallback's provider that has no org secret in the create call", () => {
    const deployment = { ANTHROPIC_API_KEY: "dep-anthropic", OPENAI_API_KEY: "dep-openai", GROQ_API_KEY: "dep-groq", ANTHROPIC_BASE_URL: "https://proxy.example" };
    expect(deploymentModelEnv({ agentConfig: { modelId: "groq/llama-3", fallbackModelIds: ["openai/gpt-4o"] }, envVars: {} }, deployment)).toEqual({ GROQ_API_KEY: "dep-groq", OPENAI_API_KEY: "dep-openai" });
    // The org secret in the create call wins over the deployment's key for that variable.
    expect(deploymentModelEnv({ agentConfig: { fallbackModelIds: ["openai/gpt-4o"] }, envVars: { OPENAI_API_KEY: "org" } }, deployment)).toEqual({ ANTHROPIC_API_KEY: "dep-anthropic", ANTHROPIC_BASE_URL: "https://proxy.example" });
    // Without a chain, nothing of another provider's.
    expect(deploymentModelEnv({ agentConfig: { modelId: "groq/llama-3" }, envVars: {} }, deployment)).toEqual({ GROQ_API_KEY: "dep-groq" });
  });
});
