/**
 * Builds of repositories that name a git credential (issue 24 leftovers, item 1), end to end on
 * the local runtime with the real local provider, boot, sidecar and credential helper: a private
 * repository served over loopback HTTP with basic auth (test/support/git-http-server.ts) is
 * cloned by the build sandbox with the org secret its repository names, fetched again by a setup
 * command, and the snapshot is recorded; the token appears in no build log, build view, sandbox
 * file or process environment. The build sandbox's own key opens the git-credential route for
 * that build's repositories only, only while the build runs, and no other sandbox route.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import { gitOrigin } from "../support/git-origin";
import { startGitHttpServer, type GitHttpServer } from "../support/git-http-server";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

const GIT_TOKEN = "ghp_buildGitToken0123456789abcdefABCDEF";

let runtime: LocalRuntime;
let api: ApiClient;
let git: GitHttpServer;
let gitRoot: string;
let gateDir: string;
let gate: string;

function hostGit(args: string[], cwd?: string): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: { PATH: process.env.PATH ?? "", HOME: gitRoot, GIT_CONFIG_NOSYSTEM: "1" } });
}

beforeAll(async () => {
  gitRoot = mkdtempSync(join(tmpdir(), "build-cred-git-"));
  const origin = gitOrigin("build-cred-origin-");
  writeFileSync(join(origin.dir, "VERSION"), "private-v1\n");
  origin.git("add", "VERSION");
  origin.git("commit", "--quiet", "-m", "v1");
  hostGit(["clone", "--quiet", "--bare", origin.dir, join(gitRoot, "app.git")]);
  rmSync(origin.dir, { recursive: true, force: true });
  git = await startGitHttpServer({ root: gitRoot, username: "x-access-token", password: GIT_TOKEN });
  gateDir = mkdtempSync(join(tmpdir(), "build-cred-gate-"));
  gate = join(gateDir, "hold");
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2", BUILD_SERVICE_VERIFY_SECONDS: "0.5", PREBUILD_REBUILD_INTERVAL_SECONDS: "0" },
  }));
});

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime));
});

afterAll(async () => {
  rmSync(gate, { force: true });
  await runtime?.builds.whenIdle();
  await runtime?.close();
  await git?.close();
  rmSync(gitRoot, { recursive: true, force: true });
  rmSync(gateDir, { recursive: true, force: true });
});

interface Build {
  id: string;
  status: string;
  sandboxId: string | null;
  snapshotId: string | null;
  error: string | null;
  log: string[];
}

/** Environments of every live process whose SESSION_ID is `id` (a build sandbox's boot, OpenCode, sidecar). */
function processEnvironments(id: string): { pid: string; env: string }[] {
  const out: { pid: string; env: string }[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const env = readFileSync(`/proc/${pid}/environ`, "latin1");
      if (env.split("\0").includes(`SESSION_ID=${id}`)) out.push({ pid, env });
    } catch {
      // exited, or not ours
    }
  }
  return out;
}

/** Every regular file under `dir` except git's object store. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "objects" && entry.name !== "node_modules") out.push(...filesUnder(path));
    } else if (entry.isFile()) out.push(path);
  }
  return out;
}

async function askCredential(buildOrSession: string, signer: string, path = "app.git"): Promise<{ status: number; text: string }> {
  const nowSeconds = Math.floor(Date.now() / 1000);
  const key = await runtime.deps.sandboxKeys.sandboxKey(signer, 0);
  const token = mintAccessToken(key, { sid: buildOrSession, iat: nowSeconds, exp: nowSeconds + 60 });
  const res = await fetch(`${runtime.url}/v1/sandbox/git-credential`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ protocol: "http", host: new URL(git.url).host, path }),
  });
  return { status: res.status, text: await res.text() };
}

async function envValuesStatus(buildId: string): Promise<number> {
  const nowSeconds = Math.floor(Date.now() / 1000);
  const token = mintAccessToken(await runtime.deps.sandboxKeys.sandboxKey(buildId, 0), { sid: buildId, iat: nowSeconds, exp: nowSeconds + 60 });
  const res = await fetch(`${runtime.url}/v1/sandbox/env-values`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: "{}" });
  return res.status;
}

describe("a prebuild of a private repository builds with the org secret its repository names", () => {
  let repoId: string;
  let prebuildId: string;
  let buildId: string;

  it("the build clones through the sidecar's credential path while it runs; the token is in no file or environment of the build sandbox", async () => {
    expect((await api.request("PUT", "/v1/secrets/GIT_TOKEN", { body: { value: GIT_TOKEN } })).status).toBe(200);
    const repo = await api.request("POST", "/v1/repos", {
      body: {
        url: `${git.url}/app.git`,
        defaultBranch: "main",
        credential: "GIT_TOKEN",
        // A setup command that needs the credential too (a private dependency, a submodule): git asks the helper again.
        setupCommands: ["git fetch --quiet origin && git rev-parse origin/main > .fetched-head && cp VERSION .built-version"],
      },
    });
    expect(repo.status, repo.text).toBe(201);
    repoId = (repo.body as { repo: { id: string } }).repo.id;
    const prebuild = await api.request("POST", "/v1/prebuilds", {
      body: { name: "private", repos: [{ repoId, workspacePath: "app" }], setupCommands: [`while [ -f '${gate}' ]; do sleep 0.1; done`] },
    });
    expect(prebuild.status, prebuild.text).toBe(201);
    prebuildId = (prebuild.body as { prebuild: { id: string } }).prebuild.id;

    writeFileSync(gate, "");
    const started = await api.request("POST", `/v1/prebuilds/${prebuildId}/builds`);
    expect(started.status, started.text).toBe(202);
    buildId = (started.body as { build: { id: string } }).build.id;

    // Held in the prebuild's own setup command, after the repository's (which fetched with the credential).
    const sandboxId = await waitFor(
      "the build sandbox past the repository's setup",
      async () => {
        const b = await runtime.deps.catalog.getBuild("dev-org", { kind: "prebuild", id: prebuildId }, buildId);
        if (b?.status === "failed") throw new Error(`build failed: ${b.error} ${b.log.join("\n")}`);
        if (!b?.sandboxId) return null;
        try {
          return readFileSync(join(runtime.sandboxDir, "sandboxes", b.sandboxId, "workspace", "app", ".built-version"), "utf8") ? b.sandboxId : null;
        } catch {
          return null;
        }
      },
      100_000,
    );
    const workspace = join(runtime.sandboxDir, "sandboxes", sandboxId, "workspace");
    expect(readFileSync(join(workspace, "app", ".built-version"), "utf8")).toBe("private-v1\n");
    expect(readFileSync(join(workspace, "app", ".fetched-head"), "utf8").trim()).toBe(hostGit(["--git-dir", join(gitRoot, "app.git"), "rev-parse", "main"]).trim());
    // Authenticated requests reached the server, and none with a wrong credential.
    expect(git.requests.some((r) => r.authorized)).toBe(true);
    expect(git.requests.filter((r) => r.authorizationHeaderPresent && !r.authorized)).toEqual([]);

    // While the build runs, its key opens the git-credential route for its own repository only.
    const served = await askCredential(buildId, buildId);
    expect(served.status, served.text).toBe(200);
    expect((JSON.parse(served.text) as { credential: { username: string; password: string } }).credential).toMatchObject({ username: "x-access-token", password: GIT_TOKEN });
    expect((await askCredential(buildId, buildId, "elsewhere.git")).status).toBe(404);
    // Another build's key, or the build id signed with some session's key: refused.
    expect((await askCredential(buildId, "bld_00000000000000000000000000")).status).toBe(401);
    // No other sandbox route takes a build sandbox.
    expect(await envValuesStatus(buildId)).toBe(401);

    // The token is in no process environment and no file of the build sandbox (specs, logs, git config, state).
    const envs = processEnvironments(buildId);
    expect(envs.length).toBeGreaterThanOrEqual(2);
    expect(envs.filter((p) => p.env.includes(GIT_TOKEN)).map((p) => p.pid)).toEqual([]);
    const sandboxRoot = join(runtime.sandboxDir, "sandboxes", sandboxId);
    expect(filesUnder(sandboxRoot).filter((f) => readFileSync(f, "latin1").includes(GIT_TOKEN))).toEqual([]);
    expect(readFileSync(join(workspace, "app", ".git", "config"), "utf8")).not.toContain("x-access-token");
  }, 110_000);

  it("released, the build succeeds and records its snapshot; the token is in no build log, view or event; the ended build's key gets nothing", async () => {
    rmSync(gate);
    await runtime.builds.whenIdle();
    const view = await api.request("GET", `/v1/prebuilds/${prebuildId}`);
    const prebuild = (view.body as { prebuild: { snapshot: { id: string } | null; latestBuild: { id: string; status: string; error: string | null } } }).prebuild;
    expect(prebuild.latestBuild, view.text).toMatchObject({ id: buildId, status: "succeeded", error: null });
    expect(prebuild.snapshot?.id).toMatch(/^lsnap_/);
    const listed = await api.request("GET", `/v1/prebuilds/${prebuildId}/builds`);
    const build = (listed.body as { items: Build[] }).items[0];
    expect(build).toMatchObject({ id: buildId, status: "succeeded", snapshotId: prebuild.snapshot?.id });
    expect(build?.log.join("\n")).toContain("$ git fetch --quiet origin");
    for (const text of [view.text, listed.text, (await api.request("GET", `/v1/repos/${repoId}`)).text]) expect(text).not.toContain(GIT_TOKEN);

    // The build is over: its sandbox's key no longer opens anything.
    const after = await askCredential(buildId, buildId);
    expect(after.status, after.text).toBe(409);
    expect(after.text).toContain("the build has ended");
  }, 100_000);

  it("a session starts from the private prebuild's snapshot without cloning, and its own key pulls with the credential", async () => {
    const created = await api.request("POST", "/v1/sessions", { body: { prebuildId } });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { session: { id: string } }).session.id;
    expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
    const s = await waitFor(`session ${id} running`, async () => {
      const x = await storedSession(runtime, id);
      if (x.status === "error") throw new Error(`session failed: ${x.errorMessage}`);
      return x.status === "running" ? x : null;
    });
    expect(s.snapshotLayer).toBe("prebuild");
    expect(s.repos).toEqual([{ url: `${git.url}/app.git`, branch: "main", workspacePath: "app", credential: "GIT_TOKEN", repoId }]);
    expect(readFileSync(join(runtime.sandboxDir, "sandboxes", s.sandboxId ?? "", "workspace", "app", ".built-version"), "utf8")).toBe("private-v1\n");
    const events = await api.request("GET", `/v1/sessions/${id}/events`);
    expect(events.text).not.toContain(GIT_TOKEN);
    expect((await api.request("DELETE", `/v1/sessions/${id}`)).status).toBe(202);
    await waitFor(`session ${id} stopped`, async () => (await storedSession(runtime, id)).status === "stopped");
  }, 100_000);
});
