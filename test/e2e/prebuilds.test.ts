/**
 * Prebuilds end to end on the local provider (issue 24; API.md "Repositories and prebuilds"):
 * the builder flow (statemachines/builds/) builds a prebuild once from a real git origin, two
 * sessions start from its snapshot without cloning (the boot's step log has no clone step, and
 * the workspace holds what only the build's setup wrote), a push refresh rebuilds it while a
 * session started meanwhile still uses the previous snapshot, the superseded snapshot is
 * deleted, and a deleted repository is refused with a 400 naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LocalRuntime } from "../../infra/local/runtime";
import { gitOrigin, type GitOrigin } from "../support/git-origin";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let origin: GitOrigin;
let gateDir: string;
let gate: string;

interface Prebuild {
  id: string;
  snapshot: { id: string; builtAt: string } | null;
  latestBuild: { id: string; status: string; error: string | null } | null;
}

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2", BUILD_SERVICE_VERIFY_SECONDS: "0.5", PREBUILD_REBUILD_INTERVAL_SECONDS: "0" } }));
  origin = gitOrigin("prebuild-origin-");
  writeFileSync(join(origin.dir, "VERSION"), "v1\n");
  origin.git("add", "VERSION");
  origin.git("commit", "--quiet", "-m", "v1");
  gateDir = mkdtempSync(join(tmpdir(), "prebuild-gate-"));
  // While this file exists, the prebuild's setup waits: a build the test holds open.
  gate = join(gateDir, "hold");
});
afterAll(async () => {
  await runtime.close();
  rmSync(origin.dir, { recursive: true, force: true });
  rmSync(gateDir, { recursive: true, force: true });
});

async function getPrebuild(id: string): Promise<Prebuild> {
  const res = await api.request("GET", `/v1/prebuilds/${id}`);
  expect(res.status).toBe(200);
  return (res.body as { prebuild: Prebuild }).prebuild;
}

async function startSession(prebuildId: string): Promise<string> {
  const res = await api.request("POST", "/v1/sessions", { body: { prebuildId } });
  expect(res.status, res.text).toBe(201);
  const id = (res.body as { session: { id: string } }).session.id;
  expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
  return id;
}

async function running(id: string) {
  return waitFor(`session ${id} running`, async () => {
    const s = await storedSession(runtime, id);
    if (s.status === "error") throw new Error(`session ${id} failed: ${s.errorMessage}`);
    return s.status === "running" ? s : null;
  });
}

/** The boot steps the session's sandbox ran (its structured boot log). */
function bootStepKinds(sandboxId: string): string[] {
  const log = readFileSync(join(runtime.sandboxDir, "sandboxes", sandboxId, "sandbox.log"), "utf8");
  return log
    .split("\n")
    .slice(0, -1) // complete lines only: the sandbox may be writing the last one
    .filter((l) => l.includes('"boot.step"'))
    .map((l) => (JSON.parse(l) as { kind?: string }).kind ?? "");
}

function workspaceFile(sandboxId: string, file: string): string {
  return readFileSync(join(runtime.sandboxDir, "sandboxes", sandboxId, "workspace", file), "utf8").trim();
}

async function stop(id: string): Promise<void> {
  expect((await api.request("DELETE", `/v1/sessions/${id}`)).status).toBe(202);
  await waitFor(`session ${id} stopped`, async () => (await storedSession(runtime, id)).status === "stopped");
}

describe("a prebuild built once serves every new session", () => {
  let repoId: string;
  let prebuildId: string;
  let firstSnapshot: string;

  it("creates the repository and the prebuild: no snapshot yet", async () => {
    const repo = await api.request("POST", "/v1/repos", {
      body: {
        url: origin.url,
        defaultBranch: "main",
        setupCommands: ['echo "built-$(cat VERSION)" > .setup-marker'],
        serviceCommands: [{ name: "web", command: "exec sleep 600" }],
      },
    });
    expect(repo.status, repo.text).toBe(201);
    repoId = (repo.body as { repo: { id: string } }).repo.id;
    const prebuild = await api.request("POST", "/v1/prebuilds", {
      body: { name: "app", repos: [{ repoId, workspacePath: "app" }], setupCommands: [`while [ -f '${gate}' ]; do sleep 0.1; done`] },
    });
    expect(prebuild.status, prebuild.text).toBe(201);
    const view = (prebuild.body as { prebuild: Prebuild }).prebuild;
    expect(view).toMatchObject({ snapshot: null, latestBuild: null });
    prebuildId = view.id;
  });

  it("POST /builds answers 202 with a running build, which the builder turns into the prebuild's snapshot", async () => {
    const res = await api.request("POST", `/v1/prebuilds/${prebuildId}/builds`);
    expect(res.status, res.text).toBe(202);
    const build = (res.body as { build: { id: string; status: string } }).build;
    expect(build.status).toBe("running");
    expect((await getPrebuild(prebuildId)).latestBuild).toMatchObject({ id: build.id, status: "running" });
    await runtime.builds.whenIdle();
    const done = await getPrebuild(prebuildId);
    expect(done.latestBuild, JSON.stringify(done)).toMatchObject({ id: build.id, status: "succeeded" });
    expect(done.snapshot?.id).toMatch(/^lsnap_/);
    firstSnapshot = done.snapshot?.id ?? "";
    // The build's log: its setup commands and the service check, kept on the build.
    const builds = (await api.request("GET", `/v1/prebuilds/${prebuildId}/builds`)).body as { items: { id: string; log: string[]; sandboxId: string }[] };
    expect(builds.items[0]?.log.join("\n")).toContain('$ echo "built-$(cat VERSION)" > .setup-marker');
    expect(builds.items[0]?.log.join("\n")).toContain("running after 0.5s");
    // The build sandbox is gone.
    expect(existsSync(join(runtime.sandboxDir, "sandboxes", builds.items[0]?.sandboxId ?? "x"))).toBe(false);
  });

  it("two sessions start from the prebuild's snapshot without cloning again", async () => {
    const ids = [await startSession(prebuildId), await startSession(prebuildId)];
    for (const id of ids) {
      const s = await running(id);
      expect(s.repos).toEqual([{ url: origin.url, branch: "main", workspacePath: "app", repoId }]);
      expect(s.snapshotLayer).toBe("prebuild");
      const kinds = bootStepKinds(s.sandboxId ?? "");
      expect(kinds).not.toContain("clone");
      expect(kinds).toContain("restore-metadata");
      // Only the build's setup wrote this file (untracked): the workspace is the snapshot's.
      expect(workspaceFile(s.sandboxId ?? "", "app/.setup-marker")).toBe("built-v1");
      const events = (await api.request("GET", `/v1/sessions/${id}/events`)).body as { items: { flow: string; snapshotLayer?: string; startedFrom?: string }[] };
      expect(events.items.find((e) => e.flow === "ensure-runtime")).toMatchObject({ snapshotLayer: "prebuild", startedFrom: firstSnapshot });
    }
    await Promise.all(ids.map(stop));
  });

  it("a push refresh rebuilds it; a session started while the build runs uses the previous snapshot", async () => {
    writeFileSync(join(origin.dir, "VERSION"), "v2\n");
    origin.git("commit", "--quiet", "-am", "v2");
    writeFileSync(gate, "");
    const refresh = await api.request("POST", `/v1/repos/${repoId}/refresh`);
    expect(refresh.status, refresh.text).toBe(202);
    const builds = (refresh.body as { builds: { id: string; target: { kind: string; id: string }; trigger: string; status: string }[] }).builds;
    expect(builds).toHaveLength(1);
    expect(builds[0]).toMatchObject({ target: { kind: "prebuild", id: prebuildId }, trigger: "push", status: "running" });

    // The build is held in its setup; a new session is not.
    const during = await startSession(prebuildId);
    const s = await running(during);
    expect((await getPrebuild(prebuildId)).latestBuild?.status).toBe("running");
    expect(s.snapshotLayer).toBe("prebuild");
    expect(workspaceFile(s.sandboxId ?? "", "app/.setup-marker")).toBe("built-v1");
    // ...and the freshness pull brought the push into it all the same (not built from this session).
    // The boot logs the step once it ended; the file is read only then, since git's checkout
    // replaces a file by removing it first (a read during the pull can find no file at all).
    await waitFor("the freshness pull (boot phase 2)", () => bootStepKinds(s.sandboxId ?? "").includes("git-pull"));
    expect(workspaceFile(s.sandboxId ?? "", "app/VERSION")).toBe("v2");

    rmSync(gate);
    await runtime.builds.whenIdle();
    const rebuilt = await getPrebuild(prebuildId);
    expect(rebuilt.latestBuild).toMatchObject({ id: builds[0]?.id, status: "succeeded" });
    expect(rebuilt.snapshot?.id).not.toBe(firstSnapshot);
    // The superseded snapshot is deleted; the last good one is kept.
    expect(existsSync(join(runtime.sandboxDir, "snapshots", firstSnapshot))).toBe(false);
    expect(existsSync(join(runtime.sandboxDir, "snapshots", rebuilt.snapshot?.id ?? "x"))).toBe(true);
    await stop(during);

    const after = await startSession(prebuildId);
    const a = await running(after);
    expect(workspaceFile(a.sandboxId ?? "", "app/.setup-marker")).toBe("built-v2");
    await stop(after);
  });

  it("a failed build is kept with its log, and the last good snapshot stays", async () => {
    const good = (await getPrebuild(prebuildId)).snapshot?.id;
    const patched = await api.request("PATCH", `/v1/prebuilds/${prebuildId}`, { body: { setupCommands: ["echo about to fail; exit 3"] } });
    expect(patched.status, patched.text).toBe(200);
    const res = await api.request("POST", `/v1/prebuilds/${prebuildId}/builds`);
    expect(res.status).toBe(202);
    await runtime.builds.whenIdle();
    const view = await getPrebuild(prebuildId);
    expect(view.latestBuild).toMatchObject({ status: "failed" });
    expect(view.latestBuild?.error).toContain("exit code 3");
    expect(view.snapshot?.id).toBe(good);
    const builds = (await api.request("GET", `/v1/prebuilds/${prebuildId}/builds`)).body as { items: { status: string; log: string[] }[] };
    expect(builds.items[0]?.status).toBe("failed");
    expect(builds.items[0]?.log).toContain("about to fail");
  });

  it("a repository a prebuild uses cannot be deleted (409); a deleted one is refused by name (400)", async () => {
    const inUse = await api.request("DELETE", `/v1/repos/${repoId}`);
    expect(inUse.status).toBe(409);
    expect((inUse.body as { error: { message: string } }).error.message).toContain(prebuildId);

    const other = await api.request("POST", "/v1/repos", { body: { url: origin.url } });
    const otherId = (other.body as { repo: { id: string } }).repo.id;
    expect((await api.request("DELETE", `/v1/repos/${otherId}`)).status).toBe(204);
    expect((await api.request("GET", `/v1/repos/${otherId}`)).status).toBe(404);
    const res = await api.request("POST", "/v1/sessions", { body: { repos: [{ repoId: otherId }] } });
    expect(res.status).toBe(400);
    expect((res.body as { error: { message: string } }).error.message).toBe(`body.repos.0.repoId: no repository "${otherId}" in this organization (unknown or deleted)`);
  });
});
