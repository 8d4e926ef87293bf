/**
 * Starting snapshot builds (API.md "Repositories and prebuilds"): on demand
 * (`POST /v1/prebuilds/{id}/builds`), after a push (`POST /v1/repos/{id}/refresh`: every
 * prebuild that includes the repo, and the repo's own snapshot where the repo layer applies) and
 * on a schedule (`rebuildStalePrebuilds`, an EventBridge Scheduler rate schedule in AWS, a timer
 * locally). Each start stores a `running` build, makes it its target's `latestBuild` and starts
 * the builder flow; the target's `snapshot` stays the last good one until the build succeeds.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Config } from "../config/config";
import { ConflictError } from "../domain/errors";
import { newSortableId } from "../domain/ids";
import { builtSnapshotUsable, type BuildRecord, type BuildTarget, type BuildTrigger, type PrebuildRecord, type RepoRecord } from "../domain/repos-prebuilds";
import type { ProviderType } from "../domain/session";
import type { BuildRunner } from "../ports/build-runner";
import type { RepoCatalog } from "../ports/repo-catalog";
import { errorForLog } from "../observability/logger";
import { prebuildBuildPlan, repoBuildPlan, type BuildPlan } from "./build-plan";

export interface BuildStartDeps {
  catalog: RepoCatalog;
  builds: BuildRunner;
  config: Config;
  now: () => Date;
  logger: Logger;
}

/** `bld_` + 26 time-ordered characters: a target's builds sort newest last by id. */
export function newBuildId(now: Date): string {
  return newSortableId("bld", now);
}

/** The repos, setup and service commands of a target as stored now, or what is missing. */
export async function loadBuildPlan(catalog: RepoCatalog, orgId: string, target: BuildTarget): Promise<BuildPlan | { missing: string }> {
  if (target.kind === "repo") {
    const repo = await catalog.getRepo(orgId, target.id);
    return repo ? repoBuildPlan(repo) : { missing: `repository ${target.id} no longer exists` };
  }
  const prebuild = await catalog.getPrebuild(orgId, target.id);
  if (!prebuild) return { missing: `prebuild ${target.id} no longer exists` };
  const repos = await loadRepos(catalog, orgId, prebuild);
  const gone = prebuild.repos.find((r) => !repos.has(r.repoId));
  if (gone) return { missing: `repository ${gone.repoId} of prebuild ${prebuild.id} no longer exists` };
  return prebuildBuildPlan(prebuild, repos);
}

async function loadRepos(catalog: RepoCatalog, orgId: string, prebuild: PrebuildRecord): Promise<Map<string, RepoRecord>> {
  const found = await Promise.all([...new Set(prebuild.repos.map((r) => r.repoId))].map((id) => catalog.getRepo(orgId, id)));
  return new Map(found.filter((r): r is RepoRecord => r !== null).map((r) => [r.id, r]));
}

export async function startBuild(deps: BuildStartDeps, input: { orgId: string; target: BuildTarget; trigger: BuildTrigger; provider: ProviderType }): Promise<BuildRecord> {
  const plan = await loadBuildPlan(deps.catalog, input.orgId, input.target);
  if ("missing" in plan) throw new ConflictError(plan.missing);
  const now = deps.now();
  const build: BuildRecord = {
    id: newBuildId(now),
    orgId: input.orgId,
    target: input.target,
    provider: input.provider,
    status: "running",
    trigger: input.trigger,
    startedAt: now.toISOString(),
    endedAt: null,
    snapshotId: null,
    sandboxId: null,
    error: null,
    log: [],
    timings: {},
  };
  if (!(await deps.catalog.startBuild(build))) throw new ConflictError(`${input.target.kind} ${input.target.id} no longer exists`);
  try {
    await deps.builds.start({ orgId: input.orgId, target: input.target, buildId: build.id });
  } catch (err) {
    deps.logger.error("could not start the builder", { buildId: build.id, error: errorForLog(err) });
    await deps.catalog.finishBuild(input.orgId, input.target, build.id, { status: "failed", endedAt: deps.now().toISOString(), snapshotId: null, error: "the builder could not be started", timings: {} });
    throw err;
  }
  deps.logger.info("build started", { buildId: build.id, target: `${input.target.kind}:${input.target.id}`, trigger: input.trigger });
  return build;
}

/**
 * Where the repo snapshot layer applies (seed 003 §6.5: Modal only), a repo's own snapshot is
 * built on Modal; elsewhere it would never be used, so none is built.
 */
export function repoSnapshotProvider(config: Config): ProviderType | null {
  return config.SANDBOX_PROVIDERS.includes("modal") ? "modal" : null;
}

/** After a push: rebuild the repo's snapshot (where it serves) and every prebuild that includes the repo. */
export async function refreshRepo(deps: BuildStartDeps, orgId: string, repo: RepoRecord): Promise<BuildRecord[]> {
  const builds: BuildRecord[] = [];
  const repoProvider = repoSnapshotProvider(deps.config);
  if (repoProvider) builds.push(await startBuild(deps, { orgId, target: { kind: "repo", id: repo.id }, trigger: "push", provider: repoProvider }));
  for (const prebuild of await deps.catalog.listPrebuilds(orgId)) {
    if (!prebuild.repos.some((r) => r.repoId === repo.id)) continue;
    builds.push(await startBuild(deps, { orgId, target: { kind: "prebuild", id: prebuild.id }, trigger: "push", provider: prebuild.provider }));
  }
  return builds;
}

/** Whether a prebuild is due for its scheduled rebuild at `now`. Pure. */
export function rebuildDue(prebuild: Pick<PrebuildRecord, "latestBuild"> & Partial<Pick<PrebuildRecord, "snapshot">>, now: Date, intervalSeconds: number): boolean {
  const last = prebuild.latestBuild;
  if (!last) return true;
  // The last good snapshot expired at its provider (a Modal image TTL) and no build is under way: build again now.
  if (prebuild.snapshot && !builtSnapshotUsable(prebuild.snapshot, now) && last.status !== "running") return true;
  const age = now.getTime() - Date.parse(last.startedAt);
  // A build still `running` long after it started died without finishing: build again.
  return age >= intervalSeconds * 1000;
}

/** The scheduled rebuild: every prebuild whose latest build started at least PREBUILD_REBUILD_INTERVAL_SECONDS ago. */
export async function rebuildStalePrebuilds(deps: BuildStartDeps): Promise<{ started: string[]; failed: string[] }> {
  const started: string[] = [];
  const failed: string[] = [];
  const now = deps.now();
  for (const prebuild of await deps.catalog.listAllPrebuilds()) {
    if (!rebuildDue(prebuild, now, deps.config.PREBUILD_REBUILD_INTERVAL_SECONDS)) continue;
    try {
      const build = await startBuild(deps, { orgId: prebuild.orgId, target: { kind: "prebuild", id: prebuild.id }, trigger: "schedule", provider: prebuild.provider });
      started.push(build.id);
    } catch (err) {
      failed.push(prebuild.id);
      deps.logger.warn("scheduled rebuild not started", { prebuildId: prebuild.id, error: errorForLog(err) });
    }
  }
  return { started, failed };
}
