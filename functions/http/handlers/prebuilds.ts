/**
 * /v1/prebuilds (API.md "Repositories and prebuilds"): a named set of the org's repositories
 * (each at a workspace path) with setup commands, built into a snapshot that sessions created
 * with `prebuildId` start from. Any role; another org's prebuild is a 404 like a missing one.
 *
 * - POST /v1/prebuilds -> 201 {prebuild: {..., snapshot: null, latestBuild: null}}; no build
 *   starts by itself: `POST /v1/prebuilds/{id}/builds` -> 202 {build}, or the schedule.
 * - GET /v1/prebuilds, GET|PATCH|DELETE /v1/prebuilds/{id}; GET shows `snapshot` ({id, builtAt},
 *   the last good one) and `latestBuild` ({id, status, trigger, startedAt, endedAt, error}).
 * - GET /v1/prebuilds/{id}/builds -> 200 {items}: the builds, newest first, failed ones with
 *   their (redacted, bounded) log.
 * - `provider` (default: the deployment's default) is where its builds run; its snapshot serves
 *   sessions on that provider only.
 */
import * as z from "zod";
import { NotFoundError, ValidationError } from "../../domain/errors";
import { newSortableId } from "../../domain/ids";
import { PrebuildId, RepoId, toBuildView, toPrebuildView, type PrebuildRecord } from "../../domain/repos-prebuilds";
import { API_WORKSPACE_ROOT, ProviderType } from "../../domain/session";
import { refineMultiLine, singleLineText } from "../../domain/text";
import { startBuild } from "../../builds/build-start";
import { repoSpecOf } from "../../builds/build-plan";
import { repoDir, WorkspacePathError } from "../../../sandbox/boot/layout";
import { httpRoute, type HttpDeps } from "../http-handler";
import { requirePrincipal } from "../session-access";
import { MAX_REPOS, WorkspacePath } from "../request-fields";
import { deleteSnapshotQuietly } from "./repos";

export const PrebuildPathParams = z.object({ id: PrebuildId }).strict();

const PrebuildRepos = z
  .array(z.object({ repoId: RepoId, workspacePath: WorkspacePath.optional() }).strict())
  .min(1)
  .max(MAX_REPOS)
  .superRefine((repos, ctx) => {
    const seen = new Map<string, number>();
    repos.forEach((r, i) => {
      const first = seen.get(r.repoId);
      if (first !== undefined) ctx.addIssue({ code: "custom", path: [i, "repoId"], message: `is listed twice (also repos.${first})` });
      seen.set(r.repoId, i);
    });
  });

const PrebuildFields = {
  name: singleLineText(100).refine((n) => n.trim().length > 0, "must not be blank"),
  repos: PrebuildRepos,
  setupCommands: z.array(z.string().min(1).max(8_192).superRefine(refineMultiLine)).max(20).optional(),
};

export const CreatePrebuildBody = z.object({ ...PrebuildFields, provider: ProviderType.optional() }).strict();
export const PatchPrebuildBody = z
  .object({ name: PrebuildFields.name.optional(), repos: PrebuildFields.repos.optional(), setupCommands: PrebuildFields.setupCommands })
  .strict()
  .refine((b) => Object.keys(b).length > 0, "must change at least one field");

/** Every repo must exist in the org, and their clone directories must differ (the boot's own rule). */
async function requireRepos(deps: Pick<HttpDeps, "catalog">, orgId: string, repos: z.infer<typeof PrebuildRepos>): Promise<void> {
  const dirs = new Map<string, number>();
  for (const [i, r] of repos.entries()) {
    const repo = await deps.catalog.getRepo(orgId, r.repoId);
    if (!repo) throw new ValidationError(`body.repos.${i}.repoId: no repository "${r.repoId}" in this organization`, "unknown_repo");
    let dir: string;
    try {
      dir = repoDir(API_WORKSPACE_ROOT, repoSpecOf(repo, { workspacePath: r.workspacePath }));
    } catch (err) {
      if (err instanceof WorkspacePathError) throw new ValidationError(`body.repos.${i}.workspacePath: the repository's directory must stay inside the workspace`);
      throw err;
    }
    const first = dirs.get(dir);
    if (first !== undefined) throw new ValidationError(`body.repos.${i}.workspacePath: clones into the same directory as repos.${first}: set a distinct workspacePath`);
    dirs.set(dir, i);
  }
}

export async function loadOwnedPrebuild(deps: Pick<HttpDeps, "catalog">, orgId: string, prebuildId: string): Promise<PrebuildRecord> {
  const prebuild = await deps.catalog.getPrebuild(orgId, prebuildId);
  if (!prebuild) throw new NotFoundError(`prebuild ${prebuildId} not found`);
  return prebuild;
}

export const makeCreatePrebuildHandler = httpRoute({ name: "CreatePrebuild", auth: true, body: CreatePrebuildBody }, async ({ body, principal }, deps) => {
  const who = requirePrincipal(principal);
  const provider = body.provider ?? deps.config.DEFAULT_SANDBOX_PROVIDER;
  if (!deps.config.SANDBOX_PROVIDERS.includes(provider)) {
    throw new ValidationError(`body.provider: "${provider}" is not enabled here (enabled: ${deps.config.SANDBOX_PROVIDERS.join(", ")})`, "provider_unavailable");
  }
  await requireRepos(deps, who.orgId, body.repos);
  const now = deps.now().toISOString();
  const prebuild: PrebuildRecord = {
    id: newSortableId("pb", deps.now()),
    orgId: who.orgId,
    name: body.name,
    repos: body.repos,
    setupCommands: body.setupCommands ?? [],
    provider,
    snapshot: null,
    latestBuild: null,
    createdAt: now,
    updatedAt: now,
  };
  await deps.catalog.createPrebuild(prebuild);
  return { status: 201, body: { prebuild: toPrebuildView(prebuild) }, headers: { location: `/v1/prebuilds/${prebuild.id}` } };
});

export const makeListPrebuildsHandler = httpRoute({ name: "ListPrebuilds", auth: true }, async ({ principal }, deps) => {
  const items = await deps.catalog.listPrebuilds(requirePrincipal(principal).orgId);
  return { status: 200, body: { items: items.map(toPrebuildView), nextCursor: null } };
});

export const makeGetPrebuildHandler = httpRoute({ name: "GetPrebuild", auth: true, params: PrebuildPathParams }, async ({ params, principal }, deps) => {
  const prebuild = await loadOwnedPrebuild(deps, requirePrincipal(principal).orgId, params.id);
  return { status: 200, body: { prebuild: toPrebuildView(prebuild) } };
});

export const makePatchPrebuildHandler = httpRoute(
  { name: "PatchPrebuild", auth: true, params: PrebuildPathParams, body: PatchPrebuildBody },
  async ({ params, body, principal }, deps) => {
    const who = requirePrincipal(principal);
    await loadOwnedPrebuild(deps, who.orgId, params.id);
    if (body.repos) await requireRepos(deps, who.orgId, body.repos);
    const updated = await deps.catalog.updatePrebuild(who.orgId, params.id, body, deps.now());
    if (!updated) throw new NotFoundError(`prebuild ${params.id} not found`);
    return { status: 200, body: { prebuild: toPrebuildView(updated) } };
  },
);

export const makeDeletePrebuildHandler = httpRoute({ name: "DeletePrebuild", auth: true, params: PrebuildPathParams }, async ({ params, principal }, deps) => {
  const who = requirePrincipal(principal);
  const deleted = await deps.catalog.deletePrebuild(who.orgId, params.id);
  if (!deleted) throw new NotFoundError(`prebuild ${params.id} not found`);
  if (deleted.snapshot) await deleteSnapshotQuietly(deps, deleted.snapshot.provider, deleted.snapshot.id);
  return { status: 204 };
});

export const makeCreatePrebuildBuildHandler = httpRoute({ name: "CreatePrebuildBuild", auth: true, params: PrebuildPathParams }, async ({ params, principal }, deps) => {
  const who = requirePrincipal(principal);
  const prebuild = await loadOwnedPrebuild(deps, who.orgId, params.id);
  const build = await startBuild(deps, { orgId: who.orgId, target: { kind: "prebuild", id: prebuild.id }, trigger: "manual", provider: prebuild.provider });
  return { status: 202, body: { build: toBuildView(build) } };
});

export const ListBuildsQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) }).strict();

export const makeListPrebuildBuildsHandler = httpRoute(
  { name: "ListPrebuildBuilds", auth: true, params: PrebuildPathParams, query: ListBuildsQuery },
  async ({ params, query, principal }, deps) => {
    const who = requirePrincipal(principal);
    await loadOwnedPrebuild(deps, who.orgId, params.id);
    const builds = await deps.catalog.listBuilds(who.orgId, { kind: "prebuild", id: params.id }, query.limit);
    return { status: 200, body: { items: builds.map(toBuildView), nextCursor: null } };
  },
);
