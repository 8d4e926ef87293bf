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
import { requireCredits } from "../../usage/usage-gate";
import { newSessionId } from "../../domain/ids";
import { QuotaExceededError, ValidationError } from "../../domain/errors";
import { chainKeyConflict, fallbackKeySecrets, gitIdentityFor } from "../../domain/agent-settings";
import { requireSecretsExist, type SecretReference } from "../secret-references";
import { newSessionRecord, toSessionView } from "../../domain/session";
import { httpRoute, type HttpDeps } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";
import { resolveSessionSource } from "../session-repos";
import { CreateSessionBody } from "../../contract/requests";

export { CreateSessionBody } from "../../contract/requests";

export { MAX_REPOS, repoUrlProblem } from "../request-fields";


/** Every secret the body names, with the field that names it (for the 400's message). */
function secretReferences(body: CreateSessionBody): SecretReference[] {
  const refs: SecretReference[] = [];
  body.repos?.forEach((r, i) => r.credential && refs.push({ field: `body.repos.${i}.credential`, name: r.credential }));
  if (body.model?.apiKeySecret) refs.push({ field: "body.model.apiKeySecret", name: body.model.apiKeySecret });
  body.fallbackModels?.forEach((m, i) => m.apiKeySecret && refs.push({ field: `body.fallbackModels.${i}.apiKeySecret`, name: m.apiKeySecret }));
  body.envFiles?.forEach((f, i) => f.keys.forEach((k, j) => k.secret && refs.push({ field: `body.envFiles.${i}.keys.${j}.secret`, name: k.secret })));
  return refs;
}


/**
 * The open-session cap (ORG_MAX_OPEN_SESSIONS): a count of the org's open-session markers, then
 * the create. Concurrent creates of one org may each see the last free place, so the cap can be
 * overshot by at most the number of creates in flight for that org at that moment (bounded by
 * the CreateSession route's throttle and reserved concurrency); never by more.
 */
async function requireOpenSessionQuota(deps: Pick<HttpDeps, "sessions" | "config">, orgId: string): Promise<void> {
  const limit = deps.config.ORG_MAX_OPEN_SESSIONS;
  let open = await deps.sessions.countOpenSessions(orgId);
  // At the cap, recount exactly: markers of sessions whose stop lost its marker delete are dropped.
  if (open >= limit) open = await deps.sessions.countOpenSessions(orgId, { reconcile: true });
  if (open >= limit) {
    throw new QuotaExceededError(
      `open sessions: the org has ${open} open sessions and the limit is ${limit}; stop one (DELETE /v1/sessions/{id}) before creating another`,
      { context: { orgId, open, limit } },
    );
  }
}

export const makeCreateSessionHandler = httpRoute(
  { name: "CreateSession", auth: true, body: CreateSessionBody },
  async ({ body, principal }, deps) => {
    const who = requirePrincipal(principal);
    if (body.provider !== undefined && !deps.config.SANDBOX_PROVIDERS.includes(body.provider)) {
      throw new ValidationError(
        `body.provider: "${body.provider}" is not enabled here (enabled: ${deps.config.SANDBOX_PROVIDERS.join(", ")})`,
        "provider_unavailable",
      );
    }
    // Omitted: the org's default chain (its key secrets exist: PUT /v1/org/model checked them).
    const fallbackModels = body.fallbackModels ?? (await deps.orgSettings.getFallbackModels(who.orgId));
    const conflict = chainKeyConflict([...(body.model ? [body.model] : []), ...fallbackModels]);
    if (conflict) throw new ValidationError(`body.fallbackModels: ${conflict}`);
    await requireSecretsExist(deps.secrets, who.orgId, secretReferences(body));
    // Repos named by id and the prebuild, resolved in the caller's org (400 naming the field).
    const source = await resolveSessionSource(deps, who.orgId, body);
    // A prebuild's sessions run where its snapshot lives unless the body says otherwise.
    const provider = body.provider ?? (source.provider && deps.config.SANDBOX_PROVIDERS.includes(source.provider) ? source.provider : deps.config.DEFAULT_SANDBOX_PROVIDER);
    await requireOpenSessionQuota(deps, who.orgId);
    // API.md "Usage, limits and credits": with the month's active seconds spent, nothing is created (402).
    await requireCredits(deps.usage, who.orgId, deps.now());
    const record = newSessionRecord({
      id: deps.newSessionId(),
      orgId: who.orgId,
      userId: who.userId,
      title: body.title,
      clientType: body.clientType,
      sessionType: body.sessionType,
      provider,
      repos: source.repos,
      envFiles: body.envFiles ?? source.envFiles,
      model: body.model,
      fallbackModels: fallbackModels.map((m) => m.id),
      fallbackKeySecrets: fallbackKeySecrets(fallbackModels),
      permissionPolicy: body.permissionPolicy,
      systemPrompt: body.systemPrompt,
      serviceCommands: body.serviceCommands ?? source.serviceCommands,
      sshPublicKey: body.sshPublicKey,
      triggerContext: body.triggerContext,
      gitIdentity: gitIdentityFor(who),
      prebuildId: body.prebuildId,
      initialPrompt: body.initialPrompt,
      now: deps.now(),
    });
    // An id from the random generator can exist nowhere: one batch write (issue 15). A caller's
    // own generator (the Slack worker reuses the id it claimed for a redelivery) keeps the condition.
    await deps.sessions.createSession(record, { freshId: deps.newSessionId === newSessionId });
    if (body.initialPrompt) {
      await deps.prompts.enqueue({ sessionId: record.id, content: body.initialPrompt, source: `user:${who.userId}`, now: deps.now() });
    }
    deps.logger.info("session created", { sessionId: record.id, provider, clientType: record.clientType });
    return { status: 201, body: { session: toSessionView(record, deps.now()) }, headers: { location: `/v1/sessions/${record.id}` } };
  },
);

export const handler = lambdaEntry(makeCreateSessionHandler);
