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
import { QuotaExceededError, ValidationError } from "../../domain/errors";
import { MODEL_KEY_ENV, ModelId, ServiceCommand, SshPublicKey, SupportedAgentModel, gitIdentityFor, modelKeyEnv } from "../../domain/agent-settings";
import { refineMultiLine, refineSingleLine, singleLineProblem, singleLineText, workspacePathTextProblem } from "../../domain/text";
import { repoDir, WorkspacePathError } from "../../../sandbox/boot/layout";
import { OutsideWorkspaceError, resolveInsideWorkspaceLexically } from "../../../sandbox/shared/workspace-path";
import { requireSecretsExist, type SecretReference } from "../secret-references";
import { API_WORKSPACE_ROOT, ClientType, MAX_FALLBACK_MODELS, PermissionPolicy, ProviderType, RepoSpec, SessionEnvFiles, SessionType, newSessionRecord, toSessionView } from "../../domain/session";
import { httpRoute, type HttpDeps } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";

/**
 * Why a repository URL is refused beyond its shape, or null. User-info is a credential in the
 * URL: it would be stored and echoed to every client of the session (API.md: credentials are
 * org secrets named by `credential`). http(s) and file URLs take none; ssh URLs a user name
 * (`ssh://git@host/...`, `git@host:path`) but never a password. The message never quotes the URL.
 */
export function repoUrlProblem(url: string): string | null {
  const text = singleLineProblem(url);
  if (text) return text;
  if (url.startsWith("git@")) {
    // scp-like `git@host:path`: everything up to the first ':' is `git@host`.
    const host = url.slice(4, url.indexOf(":") < 0 ? undefined : url.indexOf(":"));
    return host.includes("@") || host.includes("/") ? "must not carry credentials: name an org secret in `credential` instead" : null;
  }
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "must be a valid URL";
  }
  const ssh = parsed.protocol === "ssh:";
  if (parsed.password || (!ssh && parsed.username) || /^[a-z0-9+.-]+:\/\/[^/]*@[^/]*@/i.test(url)) {
    return ssh
      ? "must not carry a password: ssh URLs take a user name only (use an SSH key or an org secret in `credential`)"
      : "must not carry credentials (user:password@): name an org secret in `credential` instead";
  }
  return null;
}

const RepoUrl = z
  .string()
  .max(2048)
  .regex(/^(https?:\/\/|ssh:\/\/|git@|file:\/\/|\/)\S+$/, "must be an https://, ssh://, git@, file:// URL or an absolute path")
  .superRefine((url, ctx) => {
    const problem = repoUrlProblem(url);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

/** Where a repo is cloned, relative to the workspace ("." is the workspace itself). */
const WorkspacePath = z
  .string()
  .min(1)
  .max(1024)
  .superRefine((path, ctx) => {
    const problem = workspacePathTextProblem(path) ?? (path.startsWith("/") ? "must be relative to the workspace (its absolute path differs per provider)" : null);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
    else if (!insideWorkspace(path)) ctx.addIssue({ code: "custom", message: "must stay inside the workspace" });
  });

/** The lexical rule the boot and the sidecar apply (sandbox/shared/workspace-path.ts). */
function insideWorkspace(path: string): boolean {
  try {
    resolveInsideWorkspaceLexically(API_WORKSPACE_ROOT, path);
    return true;
  } catch (err) {
    if (err instanceof OutsideWorkspaceError) return false;
    throw err;
  }
}

/** A git branch name: printable, no whitespace (git's own rules are applied by git at clone). */
const BranchName = singleLineText(255).refine((b) => !/\s/.test(b), "must be a branch name (no whitespace)");

const CreateRepoSpec = RepoSpec.extend({ url: RepoUrl, branch: BranchName.optional(), workspacePath: WorkspacePath.optional() }).strict();

const CreateServiceCommand = ServiceCommand.extend({
  command: z.string().min(1).max(8_192).superRefine(refineMultiLine),
  cwd: WorkspacePath.optional(),
}).strict();

/** At most this many repositories per session. */
export const MAX_REPOS = 10;

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
    fallbackModels: z
      .array(ModelId.refine((id) => modelKeyEnv(id) !== null, { message: `provider must be one of ${Object.keys(MODEL_KEY_ENV).join(", ")}` }))
      .max(MAX_FALLBACK_MODELS)
      .refine((list) => new Set(list).size === list.length, "each model at most once")
      .optional(),
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
      if (repo.credential && !/^https?:\/\//.test(repo.url)) {
        ctx.addIssue({ code: "custom", path: ["repos", i, "credential"], message: "only http(s) repository URLs take a credential" });
      }
      // The boot's own rule (sandbox/boot/layout.ts `repoDir`): the clone directory, from
      // `workspacePath` or the URL's last segment, stays inside the workspace. A session the
      // boot would refuse on every resume is refused here instead.
      let dir: string;
      try {
        dir = repoDir(API_WORKSPACE_ROOT, repo);
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
    const provider = body.provider ?? deps.config.DEFAULT_SANDBOX_PROVIDER;
    if (!deps.config.SANDBOX_PROVIDERS.includes(provider)) {
      throw new ValidationError(
        `body.provider: "${provider}" is not enabled here (enabled: ${deps.config.SANDBOX_PROVIDERS.join(", ")})`,
        "provider_unavailable",
      );
    }
    await requireSecretsExist(deps.secrets, who.orgId, secretReferences(body));
    await requireOpenSessionQuota(deps, who.orgId);
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
      fallbackModels: body.fallbackModels,
      permissionPolicy: body.permissionPolicy,
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
