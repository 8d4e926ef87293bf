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

/**
 * Seed 004 failover chain entries: `"provider/model"` (its provider's key comes from the chain or
 * the deployment) or `{id, apiKeySecret?}` like the main model. Parsed to `AgentModel`.
 */
export const FallbackModel = z.preprocess((v) => (typeof v === "string" ? { id: v } : v), AgentModel);

/** A request's failover chain: at most `max` models of providers a sandbox can hand a key to, each once. */
export function fallbackModelList(max: number) {
  return z
    .array(FallbackModel.refine((m) => modelKeyEnv(m.id) !== null, { message: `provider must be one of ${Object.keys(MODEL_KEY_ENV).join(", ")}` }))
    .max(max)
    .refine((list) => new Set(list.map((m) => m.id)).size === list.length, "each model at most once");
}

/** The key secrets a chain's fallbacks name, by model id (stored beside the ids on the session). */
export function fallbackKeySecrets(models: readonly AgentModel[]): Record<string, string> {
  return Object.fromEntries(models.flatMap((m) => (m.apiKeySecret ? [[m.id, m.apiKeySecret]] : [])));
}

/** A session's fallbacks as models again: the ids with the key secrets they named. */
export function fallbackChain(session: { fallbackModels: readonly string[]; fallbackKeySecrets?: Readonly<Record<string, string>> | undefined }): AgentModel[] {
  return session.fallbackModels.map((id) => {
    const secret = session.fallbackKeySecrets?.[id];
    return secret ? { id, apiKeySecret: secret } : { id };
  });
}

/** What one provider's key variable holds in a sandbox whose chain has models of that provider. */
export interface ChainKey {
  keyEnv: string;
  /** The org secret holding it: the first model of the chain on that variable that names one; null: the deployment's own key. */
  keySecret: string | null;
}

/**
 * One key per provider variable for a model chain (the main model first, then its fallbacks):
 * a sandbox's OpenCode reads each provider's key from one variable, so every model of a provider
 * shares it. The first model naming a secret for a variable gives it; none naming one leaves the
 * deployment's own key for that provider. Unknown providers are skipped (refused at the edge).
 */
export function chainKeys(chain: readonly AgentModel[]): ChainKey[] {
  const byEnv = new Map<string, ChainKey>();
  for (const model of chain) {
    const keyEnv = modelKeyEnv(model.id);
    if (!keyEnv) continue;
    const seen = byEnv.get(keyEnv);
    if (!seen) byEnv.set(keyEnv, { keyEnv, keySecret: model.apiKeySecret ?? null });
    else if (seen.keySecret === null && model.apiKeySecret) seen.keySecret = model.apiKeySecret;
  }
  return [...byEnv.values()];
}

/** Two models of one provider naming different key secrets cannot both hold (one variable): the message for a 400, or null. */
export function chainKeyConflict(chain: readonly AgentModel[]): string | null {
  const named = new Map<string, { secret: string; modelId: string }>();
  for (const model of chain) {
    const keyEnv = modelKeyEnv(model.id);
    if (!keyEnv || !model.apiKeySecret) continue;
    const first = named.get(keyEnv);
    if (!first) named.set(keyEnv, { secret: model.apiKeySecret, modelId: model.id });
    else if (first.secret !== model.apiKeySecret) {
      return `${model.id} names key secret "${model.apiKeySecret}" but ${first.modelId} names "${first.secret}": models of provider ${modelProvider(model.id)} share one key (${keyEnv})`;
    }
  }
  return null;
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
