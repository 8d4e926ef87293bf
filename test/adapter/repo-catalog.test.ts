/**
 * The repo catalog over dynalite (functions/store/dynamo-repo-catalog.ts): builds racing on one
 * prebuild record only the later-started build's snapshot, whatever order they finish in; an
 * older build finishing last never overwrites the newer one's `latestBuild`; builds of a deleted
 * target are never stored; `updateRepoServiceCommands` (the agent's save_service_commands tool).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BuildRecord, PrebuildRecord, RepoRecord } from "../../functions/domain/repos-prebuilds";
import { boundedLog, MAX_BUILD_LOG_LINES, supersedes } from "../../functions/domain/repos-prebuilds";
import { rebuildDue } from "../../functions/builds/build-start";
import { serviceProbeScript } from "../../functions/builds/builder-steps";
import { DynamoRepoCatalog } from "../../functions/store/dynamo-repo-catalog";
import { GetCommand } from "../../functions/store/dynamodb-sdk";
import { startTestTable, type TestTable } from "../support/dynalite";
import { execFileSync } from "node:child_process";

let table: TestTable;
let catalog: DynamoRepoCatalog;
const ORG = "org-a";
const T0 = new Date("2026-01-01T00:00:00.000Z");
const at = (s: number) => new Date(T0.getTime() + s * 1000).toISOString();

function repo(id: string): RepoRecord {
  return { id, orgId: ORG, url: "https://github.com/a/b.git", defaultBranch: null, credential: null, setupCommands: [], serviceCommands: [], envFiles: [], snapshot: null, latestBuild: null, createdAt: at(0), updatedAt: at(0) };
}

function prebuild(id: string, repoId: string): PrebuildRecord {
  return { id, orgId: ORG, name: "p", repos: [{ repoId }], setupCommands: [], provider: "local", snapshot: null, latestBuild: null, createdAt: at(0), updatedAt: at(0) };
}

function build(id: string, targetId: string, startedAt: string): BuildRecord {
  return { id, orgId: ORG, target: { kind: "prebuild", id: targetId }, provider: "local", status: "running", trigger: "manual", startedAt, endedAt: null, snapshotId: null, sandboxId: null, error: null, log: [], timings: {} };
}

beforeAll(async () => {
  table = await startTestTable();
  catalog = new DynamoRepoCatalog(table.doc, table.tableName);
  await catalog.createRepo(repo("repo_1"));
  await catalog.createPrebuild(prebuild("pb_1", "repo_1"));
});
afterAll(async () => table.close());

describe("builds racing on one prebuild", () => {
  it("only the later-started build's snapshot is recorded, whichever finishes first; the loser learns it", async () => {
    const target = { kind: "prebuild" as const, id: "pb_1" };
    const older = build("bld_older", "pb_1", at(10));
    const newer = build("bld_newer", "pb_1", at(20));
    expect(await catalog.startBuild(older)).toBe(true);
    expect(await catalog.startBuild(newer)).toBe(true);
    // The newer build finishes first.
    const first = await catalog.recordSnapshot(ORG, target, { id: "snap_new", builtAt: at(30), buildId: newer.id, startedAt: newer.startedAt, provider: "local" });
    expect(first).toEqual({ recorded: true, previous: null });
    await catalog.finishBuild(ORG, target, newer.id, { status: "succeeded", endedAt: at(30), snapshotId: "snap_new", error: null, timings: {} });
    // The older one finishes later: its snapshot is not recorded, and it does not speak for the prebuild.
    const late = await catalog.recordSnapshot(ORG, target, { id: "snap_old", builtAt: at(40), buildId: older.id, startedAt: older.startedAt, provider: "local" });
    expect(late).toEqual({ recorded: false, previous: null });
    await catalog.finishBuild(ORG, target, older.id, { status: "succeeded", endedAt: at(40), snapshotId: "snap_old", error: null, timings: {} });
    const stored = await catalog.getPrebuild(ORG, "pb_1");
    expect(stored?.snapshot?.id).toBe("snap_new");
    expect(stored?.latestBuild).toMatchObject({ id: newer.id, status: "succeeded" });
    expect((await catalog.getBuild(ORG, target, older.id))?.status).toBe("succeeded");
    expect((await catalog.listBuilds(ORG, target, 10)).map((b) => b.id).sort()).toEqual(["bld_newer", "bld_older"]);
  });

  it("a newer build replaces the snapshot and names the one it superseded (to delete)", async () => {
    const target = { kind: "prebuild" as const, id: "pb_1" };
    const next = build("bld_next", "pb_1", at(50));
    await catalog.startBuild(next);
    const out = await catalog.recordSnapshot(ORG, target, { id: "snap_next", builtAt: at(60), buildId: next.id, startedAt: next.startedAt, provider: "local" });
    expect(out.recorded).toBe(true);
    expect(out.previous?.id).toBe("snap_new");
  });

  it("a build of a deleted target is never stored", async () => {
    await catalog.createPrebuild(prebuild("pb_gone", "repo_1"));
    expect(await catalog.deletePrebuild(ORG, "pb_gone")).not.toBeNull();
    expect(await catalog.startBuild(build("bld_x", "pb_gone", at(70)))).toBe(false);
    expect(await catalog.getBuild(ORG, { kind: "prebuild", id: "pb_gone" }, "bld_x")).toBeNull();
    const rec = await catalog.recordSnapshot(ORG, { kind: "prebuild", id: "pb_gone" }, { id: "s", builtAt: at(71), buildId: "bld_x", startedAt: at(70), provider: "local" });
    expect(rec.recorded).toBe(false);
    expect(await catalog.getPrebuild(ORG, "pb_gone")).toBeNull();
    // Nor can it be found by its id (what a build sandbox and the sweeper know).
    expect(await catalog.findBuild("bld_x")).toBeNull();
  });

  it("findBuild: a build by its id alone, as it is now (a locator with a TTL, written with the build); unknown ids are null", async () => {
    const target = { kind: "prebuild" as const, id: "pb_1" };
    const b = build("bld_findme", "pb_1", at(80));
    await catalog.startBuild(b);
    expect(await catalog.findBuild("bld_findme")).toEqual(b);
    await catalog.setBuildSandbox(ORG, target, b.id, "sbx-1");
    await catalog.finishBuild(ORG, target, b.id, { status: "failed", endedAt: at(90), snapshotId: null, error: "x", timings: {} });
    expect(await catalog.findBuild("bld_findme")).toMatchObject({ id: "bld_findme", orgId: ORG, target, status: "failed", sandboxId: "sbx-1" });
    expect(await catalog.findBuild("bld_unknown")).toBeNull();
    const locator = await table.doc.send(new GetCommand({ TableName: table.tableName, Key: { PK: "BUILDREF#bld_findme", SK: "BUILDREF" } }));
    expect(locator.Item?.ttl).toBe(Date.parse(at(80)) / 1000 + 24 * 3600);
  });
});

describe("repositories", () => {
  it("updateRepoServiceCommands replaces the commands; an unknown repo is null and creates nothing", async () => {
    const updated = await catalog.updateRepoServiceCommands(ORG, "repo_1", [{ name: "web", command: "npm run dev", cwd: "app" }], new Date(at(80)));
    expect(updated?.serviceCommands).toEqual([{ name: "web", command: "npm run dev", cwd: "app" }]);
    expect(updated?.updatedAt).toBe(at(80));
    expect(await catalog.updateRepoServiceCommands(ORG, "repo_nope", [], new Date(at(80)))).toBeNull();
    expect(await catalog.getRepo(ORG, "repo_nope")).toBeNull();
    // Another org sees nothing of it.
    expect(await catalog.getRepo("org-b", "repo_1")).toBeNull();
    expect(await catalog.listRepos("org-b")).toEqual([]);
  });

  it("listAllPrebuilds spans orgs (the scheduled rebuild)", async () => {
    await catalog.createPrebuild({ ...prebuild("pb_b", "repo_1"), orgId: "org-b" });
    expect((await catalog.listAllPrebuilds()).map((p) => `${p.orgId}/${p.id}`).sort()).toEqual(["org-a/pb_1", "org-b/pb_b"]);
  });
});

describe("pure rules", () => {
  it("supersedes: only a later start replaces a snapshot", () => {
    expect(supersedes(null, at(1))).toBe(true);
    expect(supersedes({ startedAt: at(1) }, at(2))).toBe(true);
    expect(supersedes({ startedAt: at(2) }, at(1))).toBe(false);
    expect(supersedes({ startedAt: at(2) }, at(2))).toBe(false);
  });

  it("rebuildDue: never built, the latest build started an interval ago (a stuck running one included), or the snapshot expired", () => {
    const now = new Date(at(100));
    expect(rebuildDue({ latestBuild: null }, now, 60)).toBe(true);
    const last = (startedAt: string, status: "running" | "succeeded") => ({ latestBuild: { id: "b", status, trigger: "schedule" as const, startedAt, endedAt: null, error: null } });
    expect(rebuildDue(last(at(50), "succeeded"), now, 60)).toBe(false);
    expect(rebuildDue(last(at(40), "succeeded"), now, 60)).toBe(true);
    expect(rebuildDue(last(at(40), "running"), now, 60)).toBe(true);
    // The last good snapshot expired at its provider (a Modal image TTL): due at once, unless a build is under way.
    const snapshot = (expiresAt: string | null) => ({ id: "im-1", builtAt: at(45), buildId: "b", startedAt: at(45), provider: "modal" as const, expiresAt });
    expect(rebuildDue({ ...last(at(50), "succeeded"), snapshot: snapshot(at(99)) }, now, 60)).toBe(true);
    expect(rebuildDue({ ...last(at(50), "succeeded"), snapshot: snapshot(at(101)) }, now, 60)).toBe(false);
    expect(rebuildDue({ ...last(at(50), "succeeded"), snapshot: snapshot(null) }, now, 60)).toBe(false);
    expect(rebuildDue({ ...last(at(90), "running"), snapshot: snapshot(at(99)) }, now, 60)).toBe(false);
  });

  it("boundedLog keeps the last lines, each cut", () => {
    const lines = Array.from({ length: MAX_BUILD_LOG_LINES + 5 }, (_, i) => `${i}`.padEnd(i === MAX_BUILD_LOG_LINES + 4 ? 600 : 1, "x"));
    const out = boundedLog(lines);
    expect(out).toHaveLength(MAX_BUILD_LOG_LINES);
    expect(out[0]).toBe("5");
    expect(out.at(-1)?.length).toBe(503);
  });

  it("the service probe: a command still running passes, one that exits non-zero fails, quoting survives", () => {
    const sh = (script: string) => {
      try {
        return { code: 0, out: execFileSync("sh", ["-c", script], { encoding: "utf8" }) };
      } catch (err) {
        const e = err as { status: number; stdout: string };
        return { code: e.status, out: e.stdout };
      }
    };
    expect(sh(serviceProbeScript("exec sleep 30", 0.3))).toMatchObject({ code: 0, out: expect.stringContaining("running after 0.3s") as string });
    expect(sh(serviceProbeScript("echo 'it broke'; exit 4", 2))).toMatchObject({ code: 4, out: expect.stringContaining("it broke") as string });
    expect(sh(serviceProbeScript("true", 2)).code).toBe(0);
  });
});
