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
import * as z from "zod";
import { QuotaExceededError, ValidationError } from "../../domain/errors";
import { SshPublicKey, SupportedAgentModel, chainKeyConflict, fallbackKeySecrets, fallbackModelList, gitIdentityFor } from "../../domain/agent-settings";
import { refineMultiLine, refineSingleLine, singleLineText } from "../../domain/text";
import { repoDir, WorkspacePathError } from "../../../sandbox/boot/layout";
import { requireSecretsExist, type SecretReference } from "../secret-references";
import { API_WORKSPACE_ROOT, ClientType, MAX_FALLBACK_MODELS, PermissionPolicy, ProviderType, RepoSpec, SessionEnvFiles, SessionType, newSessionRecord, toSessionView } from "../../domain/session";
import { httpRoute, type HttpDeps } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";
import { RepoId } from "../../domain/repos-prebuilds";
import { resolveSessionSource } from "../session-repos";
import { BranchName, CreateServiceCommand, MAX_REPOS, RepoUrl, WorkspacePath } from "../request-fields";

export { MAX_REPOS, repoUrlProblem } from "../request-fields";

/**
 * A session repo: `{url, ...}`, or `{repoId, ...}` naming a stored repository (`/v1/repos`), whose
 * URL, default branch and credential it takes (API.md "Repositories and prebuilds").
 */
const CreateRepoSpec = RepoSpec.extend({ url: RepoUrl.optional(), repoId: RepoId.optional(), branch: BranchName.optional(), workspacePath: WorkspacePath.optional() })
  .strict()
  .superRefine((repo, ctx) => {
    if (repo.url === undefined && repo.repoId === undefined) ctx.addIssue({ code: "custom", path: ["url"], message: "is required (or name a stored repository with repoId)" });
    if (repo.url !== undefined && repo.repoId !== undefined) ctx.addIssue({ code: "custom", path: ["repoId"], message: "give either url or repoId, not both" });
    if (repo.repoId !== undefined && repo.credential !== undefined) {
      ctx.addIssue({ code: "custom", path: ["credential"], message: "a stored repository brings its own credential (PATCH /v1/repos/{id} to change it)" });
    }
  });

export const CreateSessionBody = z
  .object({
    clientType: ClientType.optional(),
    sessionType: SessionType.optional(),
    title: z.string().trim().min(1).max(200).superRefine(refineSingleLine).optional(),
    repos: z.array(CreateRepoSpec).max(MAX_REPOS).optional(),
    prebuildId: singleLineText(128).optional(),
    provider: ProviderType.optional(),
    initialPrompt: z.string().min(1).max(32_000).superRefine(refineMultiLine).optional(),
    /** Env files to generate at boot: the in-sandbox CLI's schema, key names only (domain/session.ts). */
    envFiles: SessionEnvFiles.optional(),
    /** The model and the org secret holding its key; default: the org's model, else the deployment's. */
    model: SupportedAgentModel.optional(),
    /** Seed 004 failover: the models a turn moves on to after a rate-limit, auth or billing error. */
    /** Each `"provider/model"` or `{id, apiKeySecret?}`; omitted: the org's chain (`PUT /v1/org/model`), `[]`: none. */
    fallbackModels: fallbackModelList(MAX_FALLBACK_MODELS).optional(),
    /** Issue 25 §3: `auto` (default) approves the agent's permission requests; `ask` puts them to the clients. */
    permissionPolicy: PermissionPolicy.optional(),
    systemPrompt: z.string().trim().min(1).max(32_000).superRefine(refineMultiLine).optional(),
    serviceCommands: z
      .array(CreateServiceCommand)
      .max(20)
      .refine((list) => new Set(list.map((s) => s.name)).size === list.length, "service names must be unique")
      .optional(),
    sshPublicKey: SshPublicKey.superRefine(refineSingleLine).optional(),
    /** Automation runs: what triggered them (at most 16 KB of JSON). */
    triggerContext: z
      .record(z.string(), z.unknown())
      .refine((v) => JSON.stringify(v).length <= 16_384, "must be at most 16384 bytes of JSON")
      .optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    const dirs = new Map<string, number>();
    body.repos?.forEach((repo, i) => {
      // A stored repository's URL is known only once it is loaded: checked then (sessionRepos).
      if (repo.url === undefined) return;
      if (repo.credential && !/^https?:\/\//.test(repo.url)) {
        ctx.addIssue({ code: "custom", path: ["repos", i, "credential"], message: "only http(s) repository URLs take a credential" });
      }
      // The boot's own rule (sandbox/boot/layout.ts `repoDir`): the clone directory, from
      // `workspacePath` or the URL's last segment, stays inside the workspace. A session the
      // boot would refuse on every resume is refused here instead.
      let dir: string;
      try {
        dir = repoDir(API_WORKSPACE_ROOT, { url: repo.url, ...(repo.workspacePath ? { workspacePath: repo.workspacePath } : {}) });
      } catch (err) {
        if (!(err instanceof WorkspacePathError)) throw err;
        const field = repo.workspacePath === undefined ? "url" : "workspacePath";
        ctx.addIssue({ code: "custom", path: ["repos", i, field], message: "the repository's directory must stay inside the workspace" });
        return;
      }
      const first = dirs.get(dir);
      if (first !== undefined) {
        ctx.addIssue({ code: "custom", path: ["repos", i, "workspacePath"], message: `clones into the same directory as repos.${first}: set a distinct workspacePath` });
      }
      dirs.set(dir, i);
    });
  });

type CreateSessionBody = z.infer<typeof CreateSessionBody>;

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
    await deps.sessions.createSession(record);
    if (body.initialPrompt) {
      await deps.prompts.enqueue({ sessionId: record.id, content: body.initialPrompt, source: `user:${who.userId}`, now: deps.now() });
    }
    deps.logger.info("session created", { sessionId: record.id, provider, clientType: record.clientType });
    return { status: 201, body: { session: toSessionView(record, deps.now()) }, headers: { location: `/v1/sessions/${record.id}` } };
  },
);

export const handler = lambdaEntry(makeCreateSessionHandler);
