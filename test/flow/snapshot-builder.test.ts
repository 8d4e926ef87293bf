/**
 * The snapshot builder's real ASL (statemachines/builds/) with the real steps over dynalite and
 * the instant provider (issue 24): the exact create call, the snapshot recorded on the prebuild,
 * the superseded snapshot deleted with `deleteSnapshot`, the build sandbox terminated on every
 * path, a failure recorded with its message; and provision's layer resolution (seed 003 §6.5):
 * prebuild > repo (Modal, single repo at the root only) > base, recorded on the session and the
 * lifecycle event.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startBuild } from "../../functions/builds/build-start";
import type { PrebuildRecord, RepoRecord } from "../../functions/domain/repos-prebuilds";
import { LocalBuildRunner } from "../../infra/local/local-build-runner";
import { createLogger } from "../../functions/observability/logger";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

const ORG = "org-a";
const NOW = new Date().toISOString();

class DeletingProvider extends InstantSandboxProvider {
  readonly deleted: string[] = [];
  override async deleteSnapshot(snapshotId: string): Promise<void> {
    this.deleted.push(snapshotId);
  }
}

let provider: DeletingProvider;
let h: FlowHarness;
let builds: LocalBuildRunner;

function repo(id: string, overrides: Partial<RepoRecord> = {}): RepoRecord {
  return { id, orgId: ORG, url: `https://github.com/acme/${id}.git`, defaultBranch: "main", credential: null, setupCommands: [], serviceCommands: [], envFiles: [], snapshot: null, latestBuild: null, createdAt: NOW, updatedAt: NOW, ...overrides };
}

function prebuild(id: string, repoId: string, overrides: Partial<PrebuildRecord> = {}): PrebuildRecord {
  return { id, orgId: ORG, name: id, repos: [{ repoId, workspacePath: "app" }], setupCommands: [], provider: "local", snapshot: null, latestBuild: null, createdAt: NOW, updatedAt: NOW, ...overrides };
}

async function setup(type: "local" | "modal" = "local"): Promise<void> {
  provider = new DeletingProvider({ type });
  h = await startFlowHarness({ provider, agent: new ScriptedAgent(), env: type === "modal" ? { SANDBOX_PROVIDERS: "local,modal" } : {} });
  builds = new LocalBuildRunner({ deps: () => h.deps, logger: createLogger("build-test"), retryIntervalScale: 0.01 });
}

async function build(targetId: string, kind: "prebuild" | "repo" = "prebuild") {
  const started = await startBuild({ catalog: h.deps.catalog, builds, config: h.config, now: () => new Date(), logger: h.deps.logger }, { orgId: ORG, target: { kind, id: targetId }, trigger: "manual", provider: provider.type });
  await builds.whenIdle();
  const done = await h.deps.catalog.getBuild(ORG, { kind, id: targetId }, started.id);
  if (!done) throw new Error(`build ${started.id} not stored`);
  return done;
}

afterEach(async () => {
  await builds.whenIdle();
  await h.close();
});

describe("the builder", () => {
  beforeEach(() => setup());

  it("boots from the base with the prebuild's repos, records the snapshot, terminates the sandbox; a rebuild deletes the superseded snapshot", async () => {
    await h.deps.catalog.createRepo(repo("repo_a"));
    await h.deps.catalog.createPrebuild(prebuild("pb_a", "repo_a"));
    const first = await build("pb_a");
    expect(first).toMatchObject({ status: "succeeded", error: null });
    const call = provider.createCalls.at(-1);
    expect(call).toMatchObject({ sessionId: first.id, snapshotId: null, baseSnapshotId: null, envVars: { SESSION_ID: first.id } });
    expect(call?.repos).toEqual([{ url: "https://github.com/acme/repo_a.git", branch: "main", workspacePath: "app", repoId: "repo_a" }]);
    const stored = await h.deps.catalog.getPrebuild(ORG, "pb_a");
    expect(stored?.snapshot).toMatchObject({ id: first.snapshotId, buildId: first.id, provider: "local" });
    expect(stored?.latestBuild).toMatchObject({ id: first.id, status: "succeeded" });
    expect(provider.live()).toEqual([]);
    expect(provider.deleted).toEqual([]);

    const second = await build("pb_a");
    expect(second.status).toBe("succeeded");
    expect((await h.deps.catalog.getPrebuild(ORG, "pb_a"))?.snapshot?.id).toBe(second.snapshotId);
    // Exactly the superseded one: the last good snapshot is kept.
    expect(provider.deleted).toEqual([first.snapshotId]);
    expect(provider.live()).toEqual([]);
  });

  it("a setup the provider cannot run fails the build with its reason; the sandbox is terminated and the snapshot kept", async () => {
    await h.deps.catalog.createRepo(repo("repo_b", { setupCommands: ["npm ci"] }));
    await h.deps.catalog.createPrebuild(prebuild("pb_b", "repo_b", { snapshot: { id: "isnap_old", builtAt: NOW, buildId: "bld_old", startedAt: NOW, provider: "local" } }));
    const failed = await build("pb_b");
    expect(failed.status).toBe("failed");
    expect(failed.error).toContain("cannot run commands in a sandbox");
    expect(failed.log).toEqual(["$ npm ci  (in app)"]);
    expect(failed.sandboxId).toMatch(/^isb_/);
    expect(provider.sandbox(failed.sandboxId ?? "")?.state).toBe("terminated");
    const stored = await h.deps.catalog.getPrebuild(ORG, "pb_b");
    expect(stored?.snapshot?.id).toBe("isnap_old");
    expect(stored?.latestBuild).toMatchObject({ id: failed.id, status: "failed" });
    expect(provider.deleted).toEqual([]);
  });
});

describe("provision resolves the built layers", () => {
  it("a prebuild session starts from the prebuild's snapshot; the layer is on the session and the lifecycle event, with a forced freshness pull", async () => {
    await setup();
    await h.deps.catalog.createRepo(repo("repo_c"));
    await h.deps.catalog.createPrebuild(prebuild("pb_c", "repo_c", { snapshot: { id: "isnap_pb", builtAt: NOW, buildId: "bld_1", startedAt: NOW, provider: "local" } }));
    const s = await h.createSession({ orgId: ORG, prebuildId: "pb_c", repos: [{ url: "https://github.com/acme/repo_c.git", workspacePath: "app", repoId: "repo_c" }] });
    const running = await h.run("ensure-runtime", s.id);
    expect(running).toMatchObject({ status: "running", snapshotLayer: "prebuild" });
    expect(provider.createCalls.at(-1)).toMatchObject({ snapshotId: "isnap_pb", snapshotHasDeps: true, gitFreshness: { enabled: true, cadenceSeconds: 0 } });
    const events = await h.deps.events.list(s.id, { limit: 10 });
    expect(events.items.find((e) => e.flow === "ensure-runtime")).toMatchObject({ snapshotLayer: "prebuild", startedFrom: "isnap_pb" });
  });

  it("a prebuild snapshot built on another provider is skipped", async () => {
    await setup();
    await h.deps.catalog.createRepo(repo("repo_d"));
    await h.deps.catalog.createPrebuild(prebuild("pb_d", "repo_d", { snapshot: { id: "msnap", builtAt: NOW, buildId: "bld_1", startedAt: NOW, provider: "modal" } }));
    const s = await h.createSession({ orgId: ORG, prebuildId: "pb_d", repos: [{ url: "https://github.com/acme/repo_d.git", repoId: "repo_d" }] });
    expect(await h.run("ensure-runtime", s.id)).toMatchObject({ status: "running", snapshotLayer: "none" });
    expect(provider.createCalls.at(-1)?.snapshotId).toBeNull();
  });

  it("the repo layer: Modal, one stored repo at the workspace root; never with a second repo or another workspace path", async () => {
    await setup("modal");
    const snapshot = { id: "msnap_repo", builtAt: NOW, buildId: "bld_r", startedAt: NOW, provider: "modal" as const };
    await h.deps.catalog.createRepo(repo("repo_e", { snapshot }));
    const single = await h.createSession({ orgId: ORG, provider: "modal", repos: [{ url: "https://github.com/acme/repo_e.git", repoId: "repo_e" }] });
    expect(await h.run("ensure-runtime", single.id)).toMatchObject({ snapshotLayer: "repo" });
    expect(provider.createCalls.at(-1)).toMatchObject({ snapshotId: "msnap_repo", snapshotHasDeps: false });
    const nested = await h.createSession({ orgId: ORG, provider: "modal", repos: [{ url: "https://github.com/acme/repo_e.git", repoId: "repo_e", workspacePath: "sub" }] });
    expect(await h.run("ensure-runtime", nested.id)).toMatchObject({ snapshotLayer: "none" });
    const two = await h.createSession({
      orgId: ORG,
      provider: "modal",
      repos: [
        { url: "https://github.com/acme/repo_e.git", repoId: "repo_e" },
        { url: "https://github.com/acme/other.git", workspacePath: "other" },
      ],
    });
    expect(await h.run("ensure-runtime", two.id)).toMatchObject({ snapshotLayer: "none" });
  });
});
