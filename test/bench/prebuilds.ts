/**
 * Section 9: prebuilds (issue 24). Over the local runtime with the local provider (filesystem
 * snapshots, real boot, real OpenCode): a new session's time to `running` started from the base
 * (clone, no setup) versus from a prebuild's snapshot (restore, freshness pull), and the builder's
 * own duration (per step). The repository is a generated one (`FILES` files) whose setup writes
 * `SETUP_FILES` more, standing in for a dependency install. The same build of the same repository
 * as a private one (served over loopback HTTP with basic auth, its `credential` an org secret)
 * shows what the build sandbox's credential path costs (the sidecar first in the boot, the helper
 * asking the control plane).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startLocalRuntime } from "../../infra/local/runtime";
import { apiClient } from "../support/local-runtime";
import { startGitHttpServer } from "../support/git-http-server";
import { waitFor } from "../support/wait-for";
import { heading, median, ms, note, table } from "./report";

const RUNS = 3;
const FILES = 2_000;
const SETUP_FILES = 5_000;

function origin(): { dir: string; url: string } {
  const dir = mkdtempSync(join(tmpdir(), "bench-prebuild-origin-"));
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=b", "-c", "user.email=b@example.com", "-c", "init.defaultBranch=main", ...args], { cwd: dir, env: { PATH: process.env.PATH ?? "", HOME: dir, GIT_CONFIG_NOSYSTEM: "1" } });
  git("init", "--quiet");
  for (let i = 0; i < FILES; i++) writeFileSync(join(dir, `src-${i}.txt`), `file ${i}\n`.repeat(20));
  git("add", ".");
  git("commit", "--quiet", "-m", "generated");
  return { dir, url: `file://${dir}` };
}

export async function benchPrebuilds(): Promise<void> {
  heading("9. prebuilds: new session to running from the base vs from a prebuild snapshot (local provider), and the builder");
  const repo = origin();
  const runtime = await startLocalRuntime({ port: 0, env: { PREBUILD_REBUILD_INTERVAL_SECONDS: "0", BUILD_SERVICE_VERIFY_SECONDS: "1", RELAY_SCAN_INTERVAL_SECONDS: "0.5" } });
  const api = apiClient(runtime.url, runtime.devApiToken);
  try {
    const created = await api.request("POST", "/v1/repos", {
      body: { url: repo.url, setupCommands: [`mkdir -p deps && for i in $(seq 1 ${SETUP_FILES}); do echo "dep $i" > deps/$i.txt; done`], serviceCommands: [{ name: "web", command: "exec sleep 600" }] },
    });
    const repoId = (created.body as { repo: { id: string } }).repo.id;
    const pb = await api.request("POST", "/v1/prebuilds", { body: { name: "bench", repos: [{ repoId }] } });
    const prebuildId = (pb.body as { prebuild: { id: string } }).prebuild.id;

    const t0 = performance.now();
    await api.request("POST", `/v1/prebuilds/${prebuildId}/builds`);
    await runtime.builds.whenIdle();
    const buildMs = performance.now() - t0;
    const builds = (await api.request("GET", `/v1/prebuilds/${prebuildId}/builds`)).body as { items: { status: string; timings: Record<string, number> }[] };
    const build = builds.items[0];
    if (build?.status !== "succeeded") throw new Error(`the bench build did not succeed: ${JSON.stringify(build)}`);

    // The same repository, private: cloned over HTTP through the build sandbox's credential path.
    const gitRoot = mkdtempSync(join(tmpdir(), "bench-prebuild-private-"));
    execFileSync("git", ["clone", "--quiet", "--bare", repo.dir, join(gitRoot, "app.git")], { env: { PATH: process.env.PATH ?? "", HOME: gitRoot, GIT_CONFIG_NOSYSTEM: "1" } });
    const token = "ghp_benchPrivateRepoToken0123456789";
    const gitServer = await startGitHttpServer({ root: gitRoot, username: "x-access-token", password: token });
    let privateBuild: { ms: number; timings: Record<string, number> };
    try {
      await api.request("PUT", "/v1/secrets/BENCH_GIT_TOKEN", { body: { value: token } });
      const privateRepo = await api.request("POST", "/v1/repos", {
        body: { url: `${gitServer.url}/app.git`, credential: "BENCH_GIT_TOKEN", setupCommands: [`mkdir -p deps && for i in $(seq 1 ${SETUP_FILES}); do echo "dep $i" > deps/$i.txt; done`], serviceCommands: [{ name: "web", command: "exec sleep 600" }] },
      });
      const privateRepoId = (privateRepo.body as { repo: { id: string } }).repo.id;
      const privatePb = await api.request("POST", "/v1/prebuilds", { body: { name: "bench-private", repos: [{ repoId: privateRepoId }] } });
      const privatePrebuildId = (privatePb.body as { prebuild: { id: string } }).prebuild.id;
      const p0 = performance.now();
      await api.request("POST", `/v1/prebuilds/${privatePrebuildId}/builds`);
      await runtime.builds.whenIdle();
      const privateMs = performance.now() - p0;
      const privateBuilds = (await api.request("GET", `/v1/prebuilds/${privatePrebuildId}/builds`)).body as { items: { status: string; error: string | null; timings: Record<string, number> }[] };
      const done = privateBuilds.items[0];
      if (done?.status !== "succeeded") throw new Error(`the private bench build did not succeed: ${JSON.stringify(done)}`);
      privateBuild = { ms: privateMs, timings: done.timings };
    } finally {
      await gitServer.close();
      rmSync(gitRoot, { recursive: true, force: true });
    }

    const toRunning = async (body: unknown): Promise<number> => {
      const res = await api.request("POST", "/v1/sessions", { body });
      const id = (res.body as { session: { id: string } }).session.id;
      const start = performance.now();
      await api.request("POST", `/v1/sessions/${id}/resume`);
      await waitFor(
        async () => {
          const s = await runtime.deps.sessions.getSession(id);
          if (s?.status === "error") throw new Error(`bench session failed: ${s.errorMessage}`);
          return s?.status === "running";
        },
        { message: `bench session ${id} running`, timeoutMs: 180_000, intervalMs: 20 },
      );
      const took = performance.now() - start;
      await api.request("DELETE", `/v1/sessions/${id}`);
      await runtime.flows.whenIdle();
      return took;
    };
    const fromBase: number[] = [];
    const fromPrebuild: number[] = [];
    // One warm-up of each (OpenCode's caches), not counted; then alternate so load drifts hit both.
    await toRunning({ repos: [{ repoId }] });
    await toRunning({ prebuildId });
    for (let i = 0; i < RUNS; i++) {
      fromBase.push(await toRunning({ repos: [{ repoId }] }));
      fromPrebuild.push(await toRunning({ prebuildId }));
    }
    table(
      [`new session, create -> running (median of ${RUNS}, after a warm-up)`, "time", "repo in the workspace", "setup done"],
      [
        ["from the base (clone)", ms(median(fromBase)), `${FILES} files cloned`, "no (the agent would run it)"],
        ["from the prebuild snapshot (restore + freshness pull)", ms(median(fromPrebuild)), `${FILES} files + ${SETUP_FILES} from setup restored`, "yes"],
      ],
    );
    table(
      ["builder (one build)", "public repo (file://)", "private repo (HTTP + credential)"],
      [
        ["whole build, POST /builds -> succeeded", ms(buildMs), ms(privateBuild.ms)],
        ["provision (boot from the base, clone)", ms(build.timings.provision ?? 0), ms(privateBuild.timings.provision ?? 0)],
        ["setup commands + service check", ms(build.timings.setup ?? 0), ms(privateBuild.timings.setup ?? 0)],
      ],
    );
    note("The private build clones over loopback HTTP through git's credential helper, the build sandbox's sidecar");
    note("and POST /v1/sandbox/git-credential (signed with the build's own sandbox key); the public one over file://.");
    note("A session from the base still has the setup ahead of it (the builder's setup time above); one from the");
    note("prebuild has it done. The freshness pull runs in the boot's phase 2, after running.");
  } finally {
    await runtime.close();
    rmSync(repo.dir, { recursive: true, force: true });
  }
}
