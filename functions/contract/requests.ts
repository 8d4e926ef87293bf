/**
 * Public request schemas (API.md) that the route handlers validate with, in the contract module
 * so the OpenAPI document (./openapi.ts) and the typed client's types (clients/api-client) come
 * from the very schemas the server uses. Moved here from their handlers, which re-export them.
 */
import * as z from "zod";
import { SupportedAgentModel, SshPublicKey, fallbackModelList } from "../domain/agent-settings";
import { refineMultiLine, refineSingleLine, singleLineText } from "../domain/text";
import { repoDir, WorkspacePathError } from "../../sandbox/boot/layout";
import { API_WORKSPACE_ROOT, ClientType, MAX_FALLBACK_MODELS, PermissionPolicy, ProviderType, RepoSpec, SessionEnvFiles, SessionStatus, SessionType } from "../domain/session";
import { RepoId } from "../domain/repos-prebuilds";
import { BranchName, CreateServiceCommand, MAX_REPOS, RepoUrl, WorkspacePath } from "../http/request-fields";
import { PromptContent } from "../domain/prompt-content";
import { MAX_SECRET_VALUE_BYTES } from "../secrets/envelope-cipher";

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



export const ListSessionsQuery = z
  .object({
    status: SessionStatus.optional(),
    limit: z.coerce.number().int().min(1).max(100).default(20),
    cursor: z.string().min(1).max(2048).optional(),
  })
  .strict();


export const CreatePromptBody = z.object({ content: PromptContent }).strict();


export const ListMessagesQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(200).default(100),
    cursor: z.string().min(1).max(2048).optional(),
  })
  .strict();


export const ListEventsQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(50),
    cursor: z.string().min(1).max(2048).optional(),
  })
  .strict();


export const PutSecretBody = z
  .object({
    value: z
      .string()
      .min(1)
      .max(MAX_SECRET_VALUE_BYTES)
      // Messages name the limit, never the value.
      .refine((v) => Buffer.byteLength(v, "utf8") <= MAX_SECRET_VALUE_BYTES, `must be at most ${MAX_SECRET_VALUE_BYTES} bytes (UTF-8)`),
    description: z.string().max(500).superRefine(refineSingleLine).nullable().optional(),
  })
  .strict();
export type CreateSessionBody = z.infer<typeof CreateSessionBody>;
