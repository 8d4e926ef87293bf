/**
 * POST /v1/sessions (API Gateway HTTP API route).
 * Validates the body, resolves the provider, and writes the session record with a conditional
 * put: status `starting`, no sandbox (seed 000 §1: the sandbox is provisioned on first connect
 * or resume, never in this call). An `initialPrompt` goes into the session's prompt queue
 * right away, so the first connect or resume delivers it like any other queued prompt.
 * `envFiles` (key names and target paths, never values) is stored on the session and handed to
 * every sandbox the session gets, whose boot runs `sandbox env apply` with it.
 * 201 with the session and its Location.
 */
import { z } from "zod";
import { ValidationError } from "../../domain/errors";
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
  })
  .strict();

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
