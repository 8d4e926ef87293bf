/**
 * What a new session's repos come from (API.md "Repositories and prebuilds"): its own
 * `repos` (`{url}` entries as given, `{repoId}` entries from the org's stored repositories), or
 * its `prebuildId`'s repos. A stored repository brings its URL, default branch, credential,
 * service commands and env files; a name that resolves to nothing in the caller's org (unknown,
 * deleted, another org's) is a 400 naming the field, and nothing is created.
 */
import { posix } from "node:path";
import { ValidationError } from "../domain/errors";
import type { ServiceCommand } from "../domain/agent-settings";
import type { RepoRecord } from "../domain/repos-prebuilds";
import { API_WORKSPACE_ROOT, type ProviderType, type RepoSpec, type SessionEnvFiles } from "../domain/session";
import { repoDirInWorkspace, repoSpecOf, servicesInWorkspace } from "../builds/build-plan";
import { repoDir, WorkspacePathError } from "../../sandbox/boot/layout";
import type { RepoCatalog } from "../ports/repo-catalog";

export interface SessionRepoInput {
  url?: string | undefined;
  repoId?: string | undefined;
  branch?: string | undefined;
  workspacePath?: string | undefined;
  ref?: string | undefined;
  depth?: number | undefined;
  credential?: string | undefined;
}

export interface SessionSource {
  repos: RepoSpec[];
  /** From stored repositories (undefined when none was named): used when the body names none itself. */
  serviceCommands: ServiceCommand[] | undefined;
  envFiles: SessionEnvFiles | undefined;
  /** The prebuild's provider: the session's default when the body names none. */
  provider: ProviderType | null;
}

function stored(repo: RepoRecord, spec: RepoSpec): { services: ServiceCommand[]; envFiles: SessionEnvFiles } {
  const dir = repoDirInWorkspace(spec);
  return {
    services: servicesInWorkspace(repo, spec),
    envFiles: repo.envFiles.map((f) => ({ ...f, path: posix.normalize(posix.join(dir, f.path)) })),
  };
}

export async function resolveSessionSource(
  deps: { catalog: Pick<RepoCatalog, "getRepo" | "getPrebuild"> },
  orgId: string,
  body: { repos?: SessionRepoInput[] | undefined; prebuildId?: string | undefined },
): Promise<SessionSource> {
  const services: ServiceCommand[] = [];
  const envFiles: SessionEnvFiles = [];
  let fromStore = false;
  const repos: RepoSpec[] = [];
  let provider: ProviderType | null = null;
  if (body.prebuildId !== undefined) {
    const prebuild = await deps.catalog.getPrebuild(orgId, body.prebuildId);
    if (!prebuild) throw new ValidationError(`body.prebuildId: no prebuild "${body.prebuildId}" in this organization`, "unknown_prebuild");
    if (body.repos && body.repos.length > 0) throw new ValidationError("body.repos: a session with a prebuildId gets its prebuild's repos; omit repos", "invalid_request");
    provider = prebuild.provider;
    for (const entry of prebuild.repos) {
      const repo = await deps.catalog.getRepo(orgId, entry.repoId);
      if (!repo) throw new ValidationError(`body.prebuildId: repository ${entry.repoId} of prebuild ${prebuild.id} no longer exists`, "unknown_repo");
      const spec = repoSpecOf(repo, { workspacePath: entry.workspacePath });
      repos.push(spec);
      const s = stored(repo, spec);
      services.push(...s.services);
      envFiles.push(...s.envFiles);
      fromStore = true;
    }
  } else {
    for (const [i, entry] of (body.repos ?? []).entries()) {
      if (entry.repoId === undefined) {
        const { repoId: _r, ...given } = entry;
        repos.push(given as RepoSpec);
        continue;
      }
      const repo = await deps.catalog.getRepo(orgId, entry.repoId);
      if (!repo) {
        throw new ValidationError(`body.repos.${i}.repoId: no repository "${entry.repoId}" in this organization (unknown or deleted)`, "unknown_repo");
      }
      const spec: RepoSpec = {
        ...repoSpecOf(repo, { workspacePath: entry.workspacePath, branch: entry.branch }),
        ...(entry.ref !== undefined ? { ref: entry.ref } : {}),
        ...(entry.depth !== undefined ? { depth: entry.depth } : {}),
      };
      repos.push(spec);
      const s = stored(repo, spec);
      services.push(...s.services);
      envFiles.push(...s.envFiles);
      fromStore = true;
    }
  }
  requireDistinctDirs(repos);
  return { repos, serviceCommands: fromStore ? services : undefined, envFiles: fromStore ? envFiles : undefined, provider };
}

/** The boot's rule once stored repositories are expanded: each clones into its own directory inside the workspace. */
function requireDistinctDirs(repos: readonly RepoSpec[]): void {
  const dirs = new Map<string, number>();
  repos.forEach((repo, i) => {
    let dir: string;
    try {
      dir = repoDir(API_WORKSPACE_ROOT, repo);
    } catch (err) {
      if (err instanceof WorkspacePathError) throw new ValidationError(`body.repos.${i}.workspacePath: the repository's directory must stay inside the workspace`);
      throw err;
    }
    const first = dirs.get(dir);
    if (first !== undefined) throw new ValidationError(`body.repos.${i}.workspacePath: clones into the same directory as repos.${first}: set a distinct workspacePath`);
    dirs.set(dir, i);
  });
}
