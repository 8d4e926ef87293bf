/**
 * The snapshot builder (real ASL, real steps, dynalite) on the real Modal and E2B providers over
 * their stand-ins (test/support/provider-standins: each SDK's documented semantics, with state),
 * issue 24 leftovers item 3. Every SDK call is recorded (test/support/recording-sdk.ts) and the
 * exact calls of a build are asserted: the build sandbox created from the base with the build's
 * own sandbox key, the setup run with exec, the snapshot each provider records (Modal: a
 * filesystem image `im-...` from `snapshotFilesystem`; E2B: a snapshot template from
 * `createSnapshot`), the build sandbox terminated, and a rebuild deleting the superseded snapshot
 * (`images.delete` / `deleteSnapshot`). Then sessions start from what was built.
 *
 * Why builds could not run there before: the build sandbox got no sandbox key, so on these
 * providers its OpenCode tunnel (public) took no password; an E2B snapshot keeps memory, so a
 * session restored from a prebuild snapshot found the build's processes answering without a
 * password and adopted them (the build's OpenCode and a sidecar of the build id, not the
 * session's); and Modal names a sandbox after its owner id, so a provision retried after an
 * attempt that left its sandbox behind collided with it (AlreadyExistsError) until the build failed.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { rebuildStalePrebuilds, startBuild } from "../../functions/builds/build-start";
import { ProviderError } from "../../functions/domain/errors";
import type { BuildRecord, BuildTarget, PrebuildRecord, RepoRecord } from "../../functions/domain/repos-prebuilds";
import type { ProviderType } from "../../functions/domain/session";
import { createLogger } from "../../functions/observability/logger";
import type { CreateSandboxOpts, CreateSandboxResult, SandboxProvider } from "../../functions/ports/sandbox-provider";
import { E2BSandboxProvider } from "../../functions/providers/e2b/e2b-provider";
import { ModalSandboxProvider } from "../../functions/providers/modal/modal-provider";
import { LocalBuildRunner } from "../../infra/local/local-build-runner";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { E2BStandIn } from "../support/provider-standins/e2b-standin";
import { MODAL_STANDIN_BASE_IMAGE, ModalStandIn } from "../support/provider-standins/modal-standin";
import { removeStandInRoots } from "../support/provider-standins/standin-machine";
import { recordSdk, type SdkCall } from "../support/recording-sdk";
import { ScriptedAgent } from "../support/scripted-agent";

const ORG = "org-a";
const NOW = new Date().toISOString();
const APP = "builds-app";
const TEMPLATE = "sandbox:standin";
const WORKSPACE = "/home/user/workspace";

let h: FlowHarness | null = null;
let builds: LocalBuildRunner;
afterEach(async () => {
  await builds?.whenIdle();
  await h?.close();
  h = null;
});
afterAll(() => removeStandInRoots());

function repo(id: string, overrides: Partial<RepoRecord> = {}): RepoRecord {
  return {
    id,
    orgId: ORG,
    url: `https://github.com/acme/${id}.git`,
    defaultBranch: "main",
    credential: null,
    setupCommands: ["echo built > .setup-marker"],
    serviceCommands: [],
    envFiles: [],
    snapshot: null,
    latestBuild: null,
    createdAt: NOW,
    updatedAt: NOW,
    ...overrides,
  };
}

function prebuild(id: string, repoId: string, provider: ProviderType): PrebuildRecord {
  return { id, orgId: ORG, name: id, repos: [{ repoId, workspacePath: "app" }], setupCommands: [], provider, snapshot: null, latestBuild: null, createdAt: NOW, updatedAt: NOW };
}

async function harness(provider: SandboxProvider): Promise<FlowHarness> {
  h = await startFlowHarness({ provider, agent: new ScriptedAgent(), env: { SANDBOX_PROVIDERS: `local,${provider.type}`, BUILD_SERVICE_VERIFY_SECONDS: "0.2", CONTROL_PLANE_URL: "https://cp.example.test/" } });
  builds = new LocalBuildRunner({ deps: () => (h as FlowHarness).deps, logger: createLogger("cloud-build-test"), retryIntervalScale: 0.01 });
  return h;
}

async function build(t: FlowHarness, target: BuildTarget, provider: ProviderType): Promise<BuildRecord> {
  const started = await startBuild({ catalog: t.deps.catalog, builds, config: t.config, now: () => new Date(), logger: t.deps.logger }, { orgId: ORG, target, trigger: "manual", provider });
  await builds.whenIdle();
  const done = await t.deps.catalog.getBuild(ORG, target, started.id);
  if (!done) throw new Error(`build ${started.id} not stored`);
  return done;
}

/** `method` for SDK calls, `sandbox.method sandboxId` for handle calls; a compact trace to compare. */
const trace = (calls: SdkCall[]) => calls.map((c) => (c.sandboxId ? `${c.method} ${c.sandboxId}` : c.method));
const argsOf = (calls: SdkCall[], method: string) => calls.filter((c) => c.method === method).map((c) => c.args);

function modal() {
  const standIn = new ModalStandIn("v2");
  // The stand-in's clock starts in 2025; the session's sandbox expiry is computed from it, so left
  // there the expiry schedule fires at once and the migrate flow replaces the sandbox under the
  // test's reads (seen on CI under load). Real time, as the real SDK would report it.
  standIn.now = Date.now();
  const calls: SdkCall[] = [];
  const provider = new ModalSandboxProvider(recordSdk(standIn, calls), { appName: APP, baseImage: MODAL_STANDIN_BASE_IMAGE, timeoutSeconds: 3600 }, { now: () => standIn.now, readiness: { fetch: standIn.fetch, sleep: async () => undefined } });
  return { standIn, calls, provider };
}

function e2b() {
  const standIn = new E2BStandIn([TEMPLATE]);
  standIn.now = Date.now();
  const calls: SdkCall[] = [];
  const provider = new E2BSandboxProvider(recordSdk(standIn, calls), { template: TEMPLATE, timeoutSeconds: 3600 }, { readiness: { fetch: standIn.fetch, sleep: async () => undefined } });
  return { standIn, calls, provider };
}

describe("builds on Modal (stand-in)", () => {
  it("a prebuild build: the exact SDK calls, a filesystem image recorded; a rebuild deletes the superseded image; a session boots from the image with its own key", async () => {
    const m = modal();
    const t = await harness(m.provider);
    await t.deps.catalog.createRepo(repo("repo_m", { serviceCommands: [{ name: "web", command: "exec sleep 30" }] }));
    await t.deps.catalog.createPrebuild(prebuild("pb_m", "repo_m", "modal"));
    const target = { kind: "prebuild", id: "pb_m" } as const;

    const first = await build(t, target, "modal");
    expect(first, JSON.stringify(first)).toMatchObject({ status: "succeeded", error: null, sandboxId: "sb-1" });
    expect(first.snapshotId).toMatch(/^im-/);
    expect(first.log).toEqual(["$ echo built > .setup-marker  (in app)", "service web: exec sleep 30  (in app)", "running after 0.2s"]);
    const key = await t.deps.sandboxKeys.sandboxKey(first.id, 0);
    expect(trace(m.calls)).toEqual([
      // Provision: an earlier attempt's sandbox (by the build id) first, then the create from the base image.
      "sandboxes.fromName",
      "apps.fromName",
      "images.fromRegistry",
      "sandboxes.create",
      "sandbox.tunnels sb-1",
      "sandbox.exec sb-1", // the sandbox key file (on stdin)
      "sandbox.exec sb-1", // boot start (the spec on stdin)
      // Setup: the repository's command, then the service check.
      "sandboxes.fromId",
      "sandbox.exec sb-1",
      "sandboxes.fromId",
      "sandbox.exec sb-1",
      // Capture, then terminate.
      "sandboxes.fromId",
      "sandbox.snapshotFilesystem sb-1",
      "sandboxes.fromId",
      "sandbox.terminate sb-1",
    ]);
    expect(argsOf(m.calls, "sandboxes.fromName")).toEqual([[APP, first.id]]);
    expect(argsOf(m.calls, "images.fromRegistry")).toEqual([[MODAL_STANDIN_BASE_IMAGE]]);
    const [, , params] = argsOf(m.calls, "sandboxes.create")[0] as [unknown, unknown, { name: string; tags: Record<string, string>; env: Record<string, string> }];
    expect(params).toMatchObject({ name: first.id, tags: { "control-plane": APP, "session-id": first.id }, env: { SESSION_ID: first.id } });
    // The key travels as a file, never in the create call's env.
    expect(JSON.stringify(params)).not.toContain(key);
    const execs = m.calls.filter((c) => c.method === "sandbox.exec").map((c) => c.args);
    expect(execs[2]).toEqual([["sh", "-c", "echo built > .setup-marker"], { workdir: `${WORKSPACE}/app`, timeoutMs: t.config.BUILD_COMMAND_TIMEOUT_SECONDS * 1000 }]);
    expect(argsOf(m.calls, "sandbox.snapshotFilesystem")).toEqual([[{ ttlMs: null }]]);
    // The build sandbox booted with the build's key (its OpenCode takes only that key's password), and is gone.
    expect(m.standIn.boxes.get("sb-1")).toMatchObject({ running: false });
    const stored = await t.deps.catalog.getPrebuild(ORG, "pb_m");
    expect(stored?.snapshot).toMatchObject({ id: first.snapshotId, buildId: first.id, provider: "modal" });

    m.calls.length = 0;
    const second = await build(t, target, "modal");
    expect(second.status).toBe("succeeded");
    expect(second.snapshotId).toMatch(/^im-/);
    expect(argsOf(m.calls, "images.delete")).toEqual([[first.snapshotId]]);
    await expect(m.standIn.images.fromId(first.snapshotId ?? "")).rejects.toThrow(/not found/);
    await expect(m.standIn.images.fromId(second.snapshotId ?? "")).resolves.toBeDefined();

    // A session from the prebuild: created from the image, booted with the session's own key.
    m.calls.length = 0;
    const s = await t.createSession({ orgId: ORG, prebuildId: "pb_m", repos: [{ url: "https://github.com/acme/repo_m.git", workspacePath: "app", repoId: "repo_m" }] });
    const running = await t.run("ensure-runtime", s.id);
    expect(running).toMatchObject({ status: "running", snapshotLayer: "prebuild" });
    expect(argsOf(m.calls, "images.fromId")).toEqual([[second.snapshotId]]);
    const box = m.standIn.boxes.get(running.sandboxId ?? "");
    expect(box?.machine.processes).toMatchObject({ sessionId: s.id, key: await t.deps.sandboxKeys.sandboxKey(s.id, running.sandboxKeyEpoch ?? 0) });
    expect(box?.machine.readFile(`${WORKSPACE}/app/.setup-marker`)).toBe("built\n");
  });

  it("a repository's own snapshot (the repo layer, Modal only) is built at the workspace root and serves a session naming the repo", async () => {
    const m = modal();
    const t = await harness(m.provider);
    await t.deps.catalog.createRepo(repo("repo_r"));
    const done = await build(t, { kind: "repo", id: "repo_r" }, "modal");
    expect(done.status).toBe("succeeded");
    expect(done.log).toEqual(["$ echo built > .setup-marker  (in .)"]);
    expect((await t.deps.catalog.getRepo(ORG, "repo_r"))?.snapshot).toMatchObject({ id: done.snapshotId, provider: "modal" });
    const s = await t.createSession({ orgId: ORG, repos: [{ url: "https://github.com/acme/repo_r.git", repoId: "repo_r" }] });
    const running = await t.run("ensure-runtime", s.id);
    expect(running).toMatchObject({ status: "running", snapshotLayer: "repo" });
    expect(m.standIn.boxes.get(running.sandboxId ?? "")?.machine.readFile(`${WORKSPACE}/.setup-marker`)).toBe("built\n");
  });

  it("an image with a lifetime (MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS) is recorded with its expiry; once expired, sessions start from the base and the scheduled rebuild builds again", async () => {
    const standIn = new ModalStandIn("v2");
    const calls: SdkCall[] = [];
    const provider = new ModalSandboxProvider(recordSdk(standIn, calls), { appName: APP, baseImage: MODAL_STANDIN_BASE_IMAGE, timeoutSeconds: 3600, filesystemSnapshotTtlSeconds: 7200 }, { now: () => Date.now(), readiness: { fetch: standIn.fetch, sleep: async () => undefined } });
    const t = await harness(provider);
    await t.deps.catalog.createRepo(repo("repo_t"));
    await t.deps.catalog.createPrebuild(prebuild("pb_t", "repo_t", "modal"));
    const before = Date.now();
    const done = await build(t, { kind: "prebuild", id: "pb_t" }, "modal");
    expect(argsOf(calls, "sandbox.snapshotFilesystem")).toEqual([[{ ttlMs: 7_200_000 }]]);
    const snap = (await t.deps.catalog.getPrebuild(ORG, "pb_t"))?.snapshot;
    expect(snap?.id).toBe(done.snapshotId);
    expect(Date.parse(snap?.expiresAt ?? "")).toBeGreaterThanOrEqual(before + 7_200_000);
    const deps = { catalog: t.deps.catalog, builds, config: t.config, now: () => t.deps.now(), logger: t.deps.logger };
    expect((await rebuildStalePrebuilds(deps)).started).toEqual([]);

    t.advance(7_300_000);
    const s = await t.createSession({ orgId: ORG, prebuildId: "pb_t", repos: [{ url: "https://github.com/acme/repo_t.git", workspacePath: "app", repoId: "repo_t" }] });
    expect(await t.run("ensure-runtime", s.id)).toMatchObject({ status: "running", snapshotLayer: "none" });
    const rebuilt = await rebuildStalePrebuilds(deps);
    expect(rebuilt.started).toHaveLength(1);
    await builds.whenIdle();
    expect((await t.deps.catalog.getPrebuild(ORG, "pb_t"))?.latestBuild).toMatchObject({ id: rebuilt.started[0], status: "succeeded" });
  });

  it("a provision retried after an attempt that left its sandbox behind: the leftover (named after the build) is terminated first, so the retry does not collide with it", async () => {
    const m = modal();
    /** The first create makes its sandbox, then fails retryably (a Lambda that timed out mid-boot). */
    class LeavesFirstSandbox extends ModalSandboxProvider {
      failed = false;
      left: string | null = null;
      override async createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult> {
        const created = await super.createSandbox(opts);
        if (this.failed) return created;
        this.failed = true;
        this.left = created.sandboxId;
        throw new ProviderError("modal", "createSandbox", "deadline exceeded", { retryable: true, context: { kind: "transient" } });
      }
    }
    const provider = new LeavesFirstSandbox(recordSdk(m.standIn, m.calls), { appName: APP, baseImage: MODAL_STANDIN_BASE_IMAGE, timeoutSeconds: 3600 }, { now: () => m.standIn.now, readiness: { fetch: m.standIn.fetch, sleep: async () => undefined } });
    const t = await harness(provider);
    await t.deps.catalog.createRepo(repo("repo_x"));
    await t.deps.catalog.createPrebuild(prebuild("pb_x", "repo_x", "modal"));
    const done = await build(t, { kind: "prebuild", id: "pb_x" }, "modal");
    expect(done, JSON.stringify(done)).toMatchObject({ status: "succeeded" });
    expect(provider.left).toBe("sb-1");
    expect(done.sandboxId).toBe("sb-2");
    expect(m.standIn.boxes.get("sb-1")?.running).toBe(false);
    expect([...m.standIn.boxes.values()].filter((b) => b.running)).toEqual([]);
  });
});

describe("builds on E2B (stand-in)", () => {
  it("a prebuild build: the exact SDK calls, a snapshot template recorded; a rebuild deletes the superseded one; a session restored from it gets its own processes, not the build's", async () => {
    const e = e2b();
    const t = await harness(e.provider);
    await t.deps.catalog.createRepo(repo("repo_e"));
    await t.deps.catalog.createPrebuild(prebuild("pb_e", "repo_e", "e2b"));
    const target = { kind: "prebuild", id: "pb_e" } as const;

    const first = await build(t, target, "e2b");
    expect(first, JSON.stringify(first)).toMatchObject({ status: "succeeded", error: null, sandboxId: "sbx1" });
    expect(first.snapshotId).toMatch(/^e2b-snapshot:/);
    const key = await t.deps.sandboxKeys.sandboxKey(first.id, 0);
    expect(trace(e.calls)).toEqual([
      // Provision: an earlier attempt's sandboxes (by the build id in their metadata) first, then the create.
      "list",
      "create",
      "sandbox.files.write sbx1", // the boot spec
      "sandbox.files.write sbx1", // the sandbox key file
      "sandbox.commands.run sbx1", // chmod 600 on it
      "sandbox.commands.run sbx1", // boot start
      "sandbox.getHost sbx1", // the readiness probe's tunnel (OpenCode with the build key's password) and preview
      "sandbox.getHost sbx1",
      "sandbox.getHost sbx1", // the create's result
      "sandbox.getHost sbx1",
      // Setup (a running sandbox only: getInfo, then connect for what is left of its timeout).
      "getInfo",
      "connect",
      "sandbox.commands.run sbx1",
      // Capture, then terminate.
      "createSnapshot",
      "kill",
    ]);
    expect(argsOf(e.calls, "list")).toEqual([[{ query: { metadata: { sessionId: first.id } } }]]);
    const [template, opts] = argsOf(e.calls, "create")[0] as [string, { metadata: Record<string, string>; envs: Record<string, string> }];
    expect(template).toBe(TEMPLATE);
    expect(opts).toMatchObject({ metadata: { sessionId: first.id, managedBy: "sandbox-control-plane" }, envs: { SESSION_ID: first.id } });
    expect(JSON.stringify(opts)).not.toContain(key);
    expect(argsOf(e.calls, "sandbox.commands.run")[2]).toEqual(["sh -c 'echo built > .setup-marker'", { cwd: `${WORKSPACE}/app`, timeoutMs: t.config.BUILD_COMMAND_TIMEOUT_SECONDS * 1000 }]);
    expect(argsOf(e.calls, "createSnapshot")).toEqual([["sbx1"]]);
    expect(argsOf(e.calls, "kill")).toEqual([["sbx1"]]);
    expect(e.standIn.boxes.get("sbx1")?.state).toBe("killed");

    e.calls.length = 0;
    const second = await build(t, target, "e2b");
    expect(second.status).toBe("succeeded");
    expect(argsOf(e.calls, "deleteSnapshot")).toEqual([[(first.snapshotId ?? "").slice("e2b-snapshot:".length)]]);
    expect(await e.standIn.deleteSnapshot((first.snapshotId ?? "").slice("e2b-snapshot:".length))).toBe(false);
    expect((await t.deps.catalog.getPrebuild(ORG, "pb_e"))?.snapshot).toMatchObject({ id: second.snapshotId, provider: "e2b" });

    // A session from the prebuild: E2B restores the build's memory too. Its processes hold the
    // build's key, so they refuse the session's password; they are stopped and booted again with
    // the session's key and id on the restored filesystem.
    e.calls.length = 0;
    const s = await t.createSession({ orgId: ORG, prebuildId: "pb_e", repos: [{ url: "https://github.com/acme/repo_e.git", workspacePath: "app", repoId: "repo_e" }] });
    const running = await t.run("ensure-runtime", s.id);
    expect(running).toMatchObject({ status: "running", snapshotLayer: "prebuild" });
    expect(argsOf(e.calls, "create")[0]?.[0]).toBe((second.snapshotId ?? "").slice("e2b-snapshot:".length));
    const box = e.standIn.boxes.get(running.sandboxId ?? "");
    expect(box?.machine.commands.some((c) => c.includes("[b]oot.mjs run"))).toBe(true);
    expect(box?.machine.processes).toMatchObject({ sessionId: s.id, key: await t.deps.sandboxKeys.sandboxKey(s.id, running.sandboxKeyEpoch ?? 0) });
    expect(box?.machine.readFile(`${WORKSPACE}/app/.setup-marker`)).toBe("built\n");
  });
});
