/**
 * POST /v1/sessions (API Gateway HTTP API route).
 * Validates the body, resolves the provider, and writes the session record with a conditional
 * put: status `starting`, no sandbox (seed 000 §1: the sandbox is provisioned on first connect
 * or resume, never in this call). An `initialPrompt` goes into the session's prompt queue
 * right away, so the first connect or resume delivers it like any other queued prompt.
 * `envFiles` (key names and target paths, never values) is stored on the session and handed to
 * every sandbox the session gets, whose boot runs `sandbox env apply` with it.
 * Session settings (model, system prompt, service commands, SSH key, trigger context) are stored
 * and delivered at every boot; secrets are referenced by name only (a repo's `credential`, the
 * model's `apiKeySecret`, an env key's `secret`), and each name must exist in the caller's org.
 * The git identity of the agent's commits is the caller's.
 * 201 with the session and its Location.
 */
import * as z from "zod";
import { ValidationError } from "../../domain/errors";
import { ServiceCommand, SshPublicKey, SupportedAgentModel, gitIdentityFor } from "../../domain/agent-settings";
import { requireSecretsExist, type SecretReference } from "../secret-references";
import { ClientType, ProviderType, RepoSpec, SessionEnvFiles, SessionType, newSessionRecord, toSessionView } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";

const RepoUrl = z
  .string()
  .max(2048)
  .regex(/^(https?:\/\/|ssh:\/\/|git@|file:\/\/|\/)\S+$/, "must be an https://, ssh://, git@, file:// URL or an absolute path");

export const CreateSessionBody = z
  .object({
    clientType: ClientType.optional(),
    sessionType: SessionType.optional(),
    title: z.string().trim().min(1).max(200).optional(),
    repos: z.array(RepoSpec.extend({ url: RepoUrl }).strict()).max(10).optional(),
    prebuildId: z.string().min(1).max(128).optional(),
    provider: ProviderType.optional(),
    initialPrompt: z.string().min(1).max(32_000).optional(),
    /** Env files to generate at boot: the in-sandbox CLI's schema, key names only (domain/session.ts). */
    envFiles: SessionEnvFiles.optional(),
    /** The model and the org secret holding its key; default: the org's model, else the deployment's. */
    model: SupportedAgentModel.optional(),
    systemPrompt: z.string().trim().min(1).max(32_000).optional(),
    serviceCommands: z
      .array(ServiceCommand)
      .max(20)
      .refine((list) => new Set(list.map((s) => s.name)).size === list.length, "service names must be unique")
      .optional(),
    sshPublicKey: SshPublicKey.optional(),
    /** Automation runs: what triggered them (at most 16 KB of JSON). */
    triggerContext: z
      .record(z.string(), z.unknown())
      .refine((v) => JSON.stringify(v).length <= 16_384, "must be at most 16384 bytes of JSON")
      .optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    body.repos?.forEach((repo, i) => {
      if (repo.credential && !/^https?:\/\//.test(repo.url)) {
        ctx.addIssue({ code: "custom", path: ["repos", i, "credential"], message: "only http(s) repository URLs take a credential" });
      }
    });
  });

type CreateSessionBody = z.infer<typeof CreateSessionBody>;

/** Every secret the body names, with the field that names it (for the 400's message). */
function secretReferences(body: CreateSessionBody): SecretReference[] {
  const refs: SecretReference[] = [];
  body.repos?.forEach((r, i) => r.credential && refs.push({ field: `body.repos.${i}.credential`, name: r.credential }));
  if (body.model?.apiKeySecret) refs.push({ field: "body.model.apiKeySecret", name: body.model.apiKeySecret });
  body.envFiles?.forEach((f, i) => f.keys.forEach((k, j) => k.secret && refs.push({ field: `body.envFiles.${i}.keys.${j}.secret`, name: k.secret })));
  return refs;
}


export const makeCreateSessionHandler = httpRoute(
  { name: "CreateSession", auth: true, body: CreateSessionBody },
  async ({ body, principal }, deps) => {
    const who = requirePrincipal(principal);
    const provider = body.provider ?? deps.config.DEFAULT_SANDBOX_PROVIDER;
    if (!deps.config.SANDBOX_PROVIDERS.includes(provider)) {
      throw new ValidationError(
        `body.provider: "${provider}" is not enabled here (enabled: ${deps.config.SANDBOX_PROVIDERS.join(", ")})`,
        "provider_unavailable",
      );
    }
    await requireSecretsExist(deps.secrets, who.orgId, secretReferences(body));
    const record = newSessionRecord({
      id: deps.newSessionId(),
      orgId: who.orgId,
      userId: who.userId,
      title: body.title,
      clientType: body.clientType,
      sessionType: body.sessionType,
      provider,
      repos: body.repos,
      envFiles: body.envFiles,
      model: body.model,
      systemPrompt: body.systemPrompt,
      serviceCommands: body.serviceCommands,
      sshPublicKey: body.sshPublicKey,
      triggerContext: body.triggerContext,
      gitIdentity: gitIdentityFor(who),
      prebuildId: body.prebuildId,
      initialPrompt: body.initialPrompt,
      now: deps.now(),
    });
    await deps.sessions.createSession(record);
    if (body.initialPrompt) {
      await deps.prompts.enqueue({ sessionId: record.id, content: body.initialPrompt, source: `user:${who.userId}`, now: deps.now() });
    }
    deps.logger.info("session created", { sessionId: record.id, provider, clientType: record.clientType });
    return { status: 201, body: { session: toSessionView(record) }, headers: { location: `/v1/sessions/${record.id}` } };
  },
);

export const handler = lambdaEntry(makeCreateSessionHandler);
