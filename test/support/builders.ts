/** Builders with overrides for session records and principals (STYLE.md 10). */
import { newSessionId } from "../../functions/domain/ids";
import { newSessionRecord, type SessionRecord } from "../../functions/domain/session";
import type { CreateSandboxOpts } from "../../functions/ports/sandbox-provider";

export const T0 = new Date("2026-11-01T10:00:00.000Z");

export function buildSession(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return {
    ...newSessionRecord({ id: newSessionId(), orgId: "org-a", userId: "user-a", provider: "local", now: T0 }),
    ...overrides,
  };
}

/** The secrets in `sessionCreateOpts`' call, and a deployment's own keys: none may reach a boot spec. */
export const CREATE_SECRETS = {
  sandboxKey: "the-sandbox-key-0123456789abcdef",
  sessionModelKey: "sk-ant-api03-the-sessions-own-key",
  deployment: { ANTHROPIC_API_KEY: "sk-ant-api03-the-deployments-key", OPENAI_API_KEY: "sk-proj-deployment", MODAL_TOKEN_SECRET: "not-for-sandboxes" },
} as const;

/** A create call as the provision step makes it for a session with every setting (test/flow/session-settings.test.ts). */
export function sessionCreateOpts(sessionId: string, over: Partial<CreateSandboxOpts> = {}): CreateSandboxOpts {
  return {
    sessionId,
    repos: [{ url: "https://github.com/acme/app.git", credential: "GIT_TOKEN" }],
    envVars: { SESSION_ID: sessionId, SIDECAR_TOKEN: CREATE_SECRETS.sandboxKey, ANTHROPIC_API_KEY: CREATE_SECRETS.sessionModelKey },
    agentConfig: { modelId: "anthropic/claude-sonnet-4-5" },
    systemPrompt: "Be brief.",
    serviceCommands: [{ name: "web", command: "npm run dev" }],
    autoStartServices: true,
    gitIdentity: { name: "Ada", email: "ada@example.test" },
    controlPlaneUrl: "https://api.example.test",
    envFiles: [{ path: "app/.env", format: "dotenv", keys: [{ name: "DATABASE_URL", required: true }] }],
    ...over,
  };
}
