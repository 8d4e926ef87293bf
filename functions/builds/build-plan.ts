/**
 * What a build (and a session naming repos by id) does with a repository or prebuild: the repo
 * specs to clone, the setup commands and the service commands, each with the directory it runs
 * in (relative to the workspace). Pure.
 *
 * - A repo's `setupCommands` run in its own directory; its `serviceCommands`' `cwd` is relative
 *   to its directory too (default: the directory itself).
 * - A prebuild's `setupCommands` run at the workspace root, after every repo's own.
 * - A repo built alone is cloned at the workspace root (`workspacePath: "."`): the only shape
 *   the repo snapshot layer serves (seed 003 §6.5).
 */
import { posix } from "node:path";
import type { ServiceCommand } from "../domain/agent-settings";
import type { PrebuildRecord, RepoRecord } from "../domain/repos-prebuilds";
import { API_WORKSPACE_ROOT, type RepoSpec } from "../domain/session";
import { repoDir } from "../../sandbox/boot/layout";

export interface PlannedCommand {
  command: string;
  /** Relative to the workspace ("." is the workspace). */
  cwd: string;
}

export interface BuildPlan {
  repos: RepoSpec[];
  setup: PlannedCommand[];
  services: ServiceCommand[];
}

/** The session/boot repo spec of a stored repository at `workspacePath`. */
export function repoSpecOf(repo: RepoRecord, options: { workspacePath?: string | undefined; branch?: string | undefined } = {}): RepoSpec {
  return {
    url: repo.url,
    ...((options.branch ?? repo.defaultBranch) ? { branch: options.branch ?? repo.defaultBranch ?? undefined } : {}),
    ...(options.workspacePath ? { workspacePath: options.workspacePath } : {}),
    ...(repo.credential ? { credential: repo.credential } : {}),
    repoId: repo.id,
  };
}

/** The repo's directory relative to the workspace (the boot's own rule, sandbox/boot/layout.ts). */
export function repoDirInWorkspace(spec: Pick<RepoSpec, "url" | "workspacePath">): string {
  const abs = repoDir(API_WORKSPACE_ROOT, spec);
  return posix.relative(API_WORKSPACE_ROOT, abs) || ".";
}

/** A repo's service commands with their `cwd` made relative to the workspace. */
export function servicesInWorkspace(repo: RepoRecord, spec: Pick<RepoSpec, "url" | "workspacePath">): ServiceCommand[] {
  const dir = repoDirInWorkspace(spec);
  return repo.serviceCommands.map((s) => ({ ...s, cwd: posix.normalize(posix.join(dir, s.cwd ?? ".")) }));
}

function plan(entries: { repo: RepoRecord; spec: RepoSpec }[], extraSetup: readonly string[]): BuildPlan {
  const setup: PlannedCommand[] = [];
  const services: ServiceCommand[] = [];
  for (const { repo, spec } of entries) {
    const dir = repoDirInWorkspace(spec);
    for (const command of repo.setupCommands) setup.push({ command, cwd: dir });
    services.push(...servicesInWorkspace(repo, spec));
  }
  for (const command of extraSetup) setup.push({ command, cwd: "." });
  return { repos: entries.map((e) => e.spec), setup, services };
}

export function repoBuildPlan(repo: RepoRecord): BuildPlan {
  return plan([{ repo, spec: repoSpecOf(repo, { workspacePath: "." }) }], []);
}

/** `repos` must hold every repo the prebuild names (the caller reports the missing ones). */
export function prebuildBuildPlan(prebuild: PrebuildRecord, repos: ReadonlyMap<string, RepoRecord>): BuildPlan {
  const entries = prebuild.repos.map((r) => {
    const repo = repos.get(r.repoId);
    if (!repo) throw new Error(`prebuild ${prebuild.id}: repository ${r.repoId} not loaded`);
    return { repo, spec: repoSpecOf(repo, { workspacePath: r.workspacePath }) };
  });
  return plan(entries, prebuild.setupCommands);
}
