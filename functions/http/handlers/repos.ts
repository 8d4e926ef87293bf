/**
 * /v1/repos (API.md "Repositories and prebuilds"): an org's repositories, which sessions
 * (`repos: [{"repoId"}]`) and prebuilds name by id. Any role may manage them; another org's
 * repository is as unknown as a missing one (404: repos live in their org's partition).
 *
 * - POST /v1/repos -> 201 {repo}; GET /v1/repos -> 200 {items}; GET|PATCH|DELETE /v1/repos/{id}.
 * - POST /v1/repos/{id}/refresh -> 202 {builds}: what a push webhook calls (bearer auth, like
 *   every API route): rebuilds every prebuild that includes the repo (and the repo's own snapshot
 *   where that layer applies, Modal). Sessions keep starting from the last good snapshots meanwhile.
 * - DELETE refuses (409) while a prebuild names the repo; it deletes the repo's snapshot.
 *
 * A repo's `credential` (an org secret, http(s) URLs only) and env-file secrets must exist (400
 * naming the field); `serviceCommands[].cwd` and `setupCommands` run relative to the repo's own
 * directory.
 */
import * as z from "zod";
import { ConflictError, NotFoundError, ValidationError } from "../../domain/errors";
import { newSortableId } from "../../domain/ids";
import { RepoId, toBuildView, toRepoView, type RepoRecord } from "../../domain/repos-prebuilds";
import { SessionEnvFiles, type ProviderType } from "../../domain/session";
import { SecretName } from "../../domain/agent-settings";
import { refineMultiLine } from "../../domain/text";
import { refreshRepo } from "../../builds/build-start";
import { errorForLog } from "../../observability/logger";
import { httpRoute, type HttpDeps } from "../http-handler";
import { requireSecretsExist, type SecretReference } from "../secret-references";
import { requirePrincipal } from "../session-access";
import { BranchName, CreateServiceCommand, RepoUrl } from "../request-fields";

export const RepoPathParams = z.object({ id: RepoId }).strict();

const SetupCommands = z.array(z.string().min(1).max(8_192).superRefine(refineMultiLine)).max(20);
const ServiceCommands = z
  .array(CreateServiceCommand)
  .max(20)
  .refine((list) => new Set(list.map((s) => s.name)).size === list.length, "service names must be unique");

const RepoFields = {
  url: RepoUrl,
  defaultBranch: BranchName.nullable().optional(),
  credential: SecretName.nullable().optional(),
  setupCommands: SetupCommands.optional(),
  serviceCommands: ServiceCommands.optional(),
  envFiles: SessionEnvFiles.optional(),
};

function credentialNeedsHttp(body: { url?: string | undefined; credential?: string | null | undefined }, ctx: z.RefinementCtx): void {
  if (body.credential && body.url !== undefined && !/^https?:\/\//.test(body.url)) {
    ctx.addIssue({ code: "custom", path: ["credential"], message: "only http(s) repository URLs take a credential" });
  }
}

export const CreateRepoBody = z.object(RepoFields).strict().superRefine(credentialNeedsHttp);
export const PatchRepoBody = z
  .object({ ...RepoFields, url: RepoUrl.optional() })
  .strict()
  .superRefine(credentialNeedsHttp)
  .refine((b) => Object.keys(b).length > 0, "must change at least one field");

function secretReferences(body: { credential?: string | null | undefined; envFiles?: SessionEnvFiles | undefined }): SecretReference[] {
  const refs: SecretReference[] = [];
  if (body.credential) refs.push({ field: "body.credential", name: body.credential });
  body.envFiles?.forEach((f, i) => f.keys.forEach((k, j) => k.secret && refs.push({ field: `body.envFiles.${i}.keys.${j}.secret`, name: k.secret })));
  return refs;
}

export async function loadOwnedRepo(deps: Pick<HttpDeps, "catalog">, orgId: string, repoId: string): Promise<RepoRecord> {
  const repo = await deps.catalog.getRepo(orgId, repoId);
  if (!repo) throw new NotFoundError(`repository ${repoId} not found`);
  return repo;
}

export const makeCreateRepoHandler = httpRoute({ name: "CreateRepo", auth: true, body: CreateRepoBody }, async ({ body, principal }, deps) => {
  const who = requirePrincipal(principal);
  await requireSecretsExist(deps.secrets, who.orgId, secretReferences(body));
  const now = deps.now().toISOString();
  const repo: RepoRecord = {
    id: newSortableId("repo", deps.now()),
    orgId: who.orgId,
    url: body.url,
    defaultBranch: body.defaultBranch ?? null,
    credential: body.credential ?? null,
    setupCommands: body.setupCommands ?? [],
    serviceCommands: body.serviceCommands ?? [],
    envFiles: body.envFiles ?? [],
    snapshot: null,
    latestBuild: null,
    createdAt: now,
    updatedAt: now,
  };
  await deps.catalog.createRepo(repo);
  return { status: 201, body: { repo: toRepoView(repo) }, headers: { location: `/v1/repos/${repo.id}` } };
});

export const makeListReposHandler = httpRoute({ name: "ListRepos", auth: true }, async ({ principal }, deps) => {
  const repos = await deps.catalog.listRepos(requirePrincipal(principal).orgId);
  return { status: 200, body: { items: repos.map(toRepoView), nextCursor: null } };
});

export const makeGetRepoHandler = httpRoute({ name: "GetRepo", auth: true, params: RepoPathParams }, async ({ params, principal }, deps) => {
  const repo = await loadOwnedRepo(deps, requirePrincipal(principal).orgId, params.id);
  return { status: 200, body: { repo: toRepoView(repo) } };
});

export const makePatchRepoHandler = httpRoute({ name: "PatchRepo", auth: true, params: RepoPathParams, body: PatchRepoBody }, async ({ params, body, principal }, deps) => {
  const who = requirePrincipal(principal);
  const current = await loadOwnedRepo(deps, who.orgId, params.id);
  const credential = body.credential === undefined ? current.credential : body.credential;
  if (credential && !/^https?:\/\//.test(body.url ?? current.url)) {
    throw new ValidationError(`body.${body.url === undefined ? "credential" : "url"}: only http(s) repository URLs take a credential (set credential to null for this URL)`);
  }
  await requireSecretsExist(deps.secrets, who.orgId, secretReferences(body));
  const updated = await deps.catalog.updateRepo(who.orgId, params.id, body, deps.now());
  if (!updated) throw new NotFoundError(`repository ${params.id} not found`);
  return { status: 200, body: { repo: toRepoView(updated) } };
});

export const makeDeleteRepoHandler = httpRoute({ name: "DeleteRepo", auth: true, params: RepoPathParams }, async ({ params, principal }, deps) => {
  const who = requirePrincipal(principal);
  await loadOwnedRepo(deps, who.orgId, params.id);
  const users = (await deps.catalog.listPrebuilds(who.orgId)).filter((p) => p.repos.some((r) => r.repoId === params.id));
  if (users.length > 0) {
    throw new ConflictError(`repository ${params.id} is used by prebuild${users.length > 1 ? "s" : ""} ${users.map((p) => p.id).join(", ")}: remove it from them (or delete them) first`);
  }
  const deleted = await deps.catalog.deleteRepo(who.orgId, params.id);
  if (!deleted) throw new NotFoundError(`repository ${params.id} not found`);
  if (deleted.snapshot) await deleteSnapshotQuietly(deps, deleted.snapshot.provider, deleted.snapshot.id);
  return { status: 204 };
});

export const makeRefreshRepoHandler = httpRoute({ name: "RefreshRepo", auth: true, params: RepoPathParams }, async ({ params, principal }, deps) => {
  const who = requirePrincipal(principal);
  const repo = await loadOwnedRepo(deps, who.orgId, params.id);
  const builds = await refreshRepo(deps, who.orgId, repo);
  return { status: 202, body: { builds: builds.map(toBuildView) } };
});

/** A deleted target's snapshot: deleted now, best effort (a failure is logged; nothing refers to it any more). */
export async function deleteSnapshotQuietly(deps: Pick<HttpDeps, "provider" | "logger">, providerType: ProviderType, snapshotId: string): Promise<void> {
  try {
    const provider = await deps.provider(providerType);
    await provider.deleteSnapshot(snapshotId);
  } catch (err) {
    deps.logger.warn("could not delete the snapshot of a deleted repository or prebuild", { snapshotId, error: errorForLog(err) });
  }
}
