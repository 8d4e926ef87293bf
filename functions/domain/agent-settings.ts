/**
 * What a session tells its agent and its sandbox besides repos (seed 000 "context loading",
 * seed 003 §6, seed 004's environment table): the model and the secret holding its key, the
 * system prompt, service commands, the SSH key, automation trigger context, and the git
 * identity of the session's user. Pure schemas and one pure resolver; no values of secrets
 * ever live here, only the names of the org secrets that hold them.
 */
import * as z from "zod";

/** API.md "Secrets": names like environment variables. */
export const SECRET_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const SecretName = z.string().regex(SECRET_NAME_PATTERN, "must be a secret name ([A-Za-z_][A-Za-z0-9_]{0,127})");

/** OpenCode's `provider/model` form, e.g. `anthropic/claude-sonnet-4-5`. */
export const ModelId = z
  .string()
  .max(200)
  .regex(/^[a-z0-9][a-z0-9-]*\/[A-Za-z0-9._:@/-]+$/, "must be provider/model, e.g. anthropic/claude-sonnet-4-5");

/** A model and the org secret holding its provider's API key (omitted: the deployment's own key, if any). */
export const AgentModel = z.object({ id: ModelId, apiKeySecret: SecretName.optional() }).strict();
export type AgentModel = z.infer<typeof AgentModel>;

/**
 * The environment variable each model provider's key goes in: what OpenCode's providers read.
 * `dev` is the offline development model (sandbox/dev-model), which checks it when configured to.
 */
export const MODEL_KEY_ENV: Readonly<Record<string, string>> = {
  anthropic: "ANTHROPIC_API_KEY",
  openai: "OPENAI_API_KEY",
  google: "GOOGLE_GENERATIVE_AI_API_KEY",
  openrouter: "OPENROUTER_API_KEY",
  groq: "GROQ_API_KEY",
  mistral: "MISTRAL_API_KEY",
  xai: "XAI_API_KEY",
  deepseek: "DEEPSEEK_API_KEY",
  dev: "DEV_MODEL_API_KEY",
};

export function modelProvider(modelId: string): string {
  return modelId.slice(0, modelId.indexOf("/"));
}

/** Names an env var a sandbox understands; `null` for a provider we cannot hand a key to. */
export function modelKeyEnv(modelId: string): string | null {
  return MODEL_KEY_ENV[modelProvider(modelId)] ?? null;
}

/** The model a sandbox runs, and where its key comes from. */
export type ResolvedModel =
  /** A model whose key is the org secret `keySecret`, delivered as `keyEnv`. */
  | { source: "session" | "org"; modelId: string; keyEnv: string; keySecret: string }
  /** A model named without a key secret: the deployment's own key for that provider, if it has one. */
  | { source: "session" | "org"; modelId: string; keyEnv: string; keySecret: null }
  /** Nothing configured: the deployment default (its Anthropic key, else the development model). */
  | { source: "default" };

/** Session over org over deployment default (seed 000: agentConfig derived per session). */
export function resolveModel(session: AgentModel | null, org: AgentModel | null): ResolvedModel {
  const chosen = session ? { source: "session" as const, model: session } : org ? { source: "org" as const, model: org } : null;
  if (!chosen) return { source: "default" };
  const keyEnv = modelKeyEnv(chosen.model.id);
  if (!keyEnv) throw new Error(`model ${chosen.model.id}: no known key variable for provider ${modelProvider(chosen.model.id)}`);
  return { source: chosen.source, modelId: chosen.model.id, keyEnv, keySecret: chosen.model.apiKeySecret ?? null };
}

/** A model whose provider the sandbox can hand a key to (a `superRefine` for request bodies). */
export const SupportedAgentModel = AgentModel.refine((m) => modelKeyEnv(m.id) !== null, {
  message: `provider must be one of ${Object.keys(MODEL_KEY_ENV).join(", ")}`,
  path: ["id"],
});

/** Service names as the sidecar accepts them (sandbox/sidecar/service-state.ts). */
export const ServiceCommand = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "must be 1-63 letters, digits, '.', '_' or '-'"),
    command: z.string().min(1).max(8_192),
    /** Relative to the workspace. */
    cwd: z.string().min(1).max(255).optional(),
  })
  .strict();
export type ServiceCommand = z.infer<typeof ServiceCommand>;

/** An OpenSSH public key line (the sandbox appends it to `authorized_keys`). */
export const SshPublicKey = z
  .string()
  .max(16_384)
  .regex(/^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\r\n]*)?$/, "must be one OpenSSH public key line");

/** The git author of the agent's commits: the session's user (seed 004 `GIT_USER_NAME`/`GIT_USER_EMAIL`). */
export const GitIdentity = z.object({ name: z.string().min(1).max(200), email: z.string().min(3).max(320) }).strict();
export type GitIdentity = z.infer<typeof GitIdentity>;

/** The identity of a principal that has no profile: its user id, and a no-reply address built from it. */
export function gitIdentityFor(user: { userId: string; name?: string | null; email?: string | null }): GitIdentity {
  const local = user.userId.replace(/[^A-Za-z0-9._+-]+/g, "-").replace(/^-+|-+$/g, "") || "user";
  return { name: user.name || user.userId, email: user.email || `${local}@users.noreply.sandbox.invalid` };
}
