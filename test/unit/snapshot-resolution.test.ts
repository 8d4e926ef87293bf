import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { resolveSnapshot, snapshotHasDeps, type SnapshotResolutionInput } from "../../functions/domain/snapshot-resolution";

const repo = { url: "https://github.com/acme/web.git" };
const all: SnapshotResolutionInput = {
  provider: "modal",
  repos: [repo],
  sessionSnapshotId: "mem:sn-1",
  prebuild: { snapshotId: "im-prebuild", status: "ready" },
  repoSnapshot: { snapshotId: "im-repo", status: "ready", provider: "modal" },
  baseSnapshotId: "im-base",
};

describe("resolveSnapshot", () => {
  it("walks session > prebuild > repo > base > none", () => {
    expect(resolveSnapshot(all)).toEqual({ layer: "session", snapshotId: "mem:sn-1", baseSnapshotId: null, snapshotHasDeps: true });
    const noSession = { ...all, sessionSnapshotId: null };
    expect(resolveSnapshot(noSession)).toEqual({ layer: "prebuild", snapshotId: "im-prebuild", baseSnapshotId: null, snapshotHasDeps: true });
    const noPrebuild = { ...noSession, prebuild: null };
    expect(resolveSnapshot(noPrebuild)).toEqual({ layer: "repo", snapshotId: "im-repo", baseSnapshotId: null, snapshotHasDeps: false });
    const noRepo = { ...noPrebuild, repoSnapshot: null };
    expect(resolveSnapshot(noRepo)).toEqual({ layer: "base", snapshotId: null, baseSnapshotId: "im-base", snapshotHasDeps: false });
    expect(resolveSnapshot({ ...noRepo, baseSnapshotId: null })).toEqual({ layer: "none", snapshotId: null, baseSnapshotId: null, snapshotHasDeps: false });
  });

  it("skips a prebuild that is not ready", () => {
    expect(resolveSnapshot({ ...all, sessionSnapshotId: null, prebuild: { snapshotId: "im-p", status: "building" } }).layer).toBe("repo");
  });

  it.each<[string, Partial<SnapshotResolutionInput>]>([
    ["E2B", { provider: "e2b" }],
    ["unknown provider", { provider: null }],
    ["multi-repo", { repos: [repo, { url: "https://github.com/acme/api.git" }] }],
    ["repo not at the workspace root", { repos: [{ ...repo, workspacePath: "web" }] }],
    ["repo snapshot not ready", { repoSnapshot: { snapshotId: "im-repo", status: "building", provider: "modal" } }],
    ["repo snapshot for another provider", { repoSnapshot: { snapshotId: "im-repo", status: "ready", provider: "e2b" } }],
  ])("skips the repo layer for %s", (_name, over) => {
    expect(resolveSnapshot({ ...all, sessionSnapshotId: null, prebuild: null, ...over }).layer).toBe("base");
  });

  it("accepts an explicit workspacePath '.' and a provider-less repo snapshot", () => {
    const input = { ...all, sessionSnapshotId: null, prebuild: null, repos: [{ ...repo, workspacePath: "." }], repoSnapshot: { snapshotId: "im-repo", status: "ready", provider: null } };
    expect(resolveSnapshot(input).layer).toBe("repo");
  });

  it("law: a session snapshot always wins, and snapshotHasDeps matches the chosen layer", () => {
    const maybeId = fc.option(fc.string({ minLength: 1, maxLength: 8 }));
    fc.assert(
      fc.property(
        fc.constantFrom("modal", "e2b", "local", null),
        maybeId,
        maybeId,
        fc.constantFrom("ready", "building"),
        maybeId,
        maybeId,
        (provider, session, prebuild, status, repoSnap, baseId) => {
          const r = resolveSnapshot({
            provider: provider as SnapshotResolutionInput["provider"],
            repos: [repo],
            sessionSnapshotId: session,
            prebuild: { snapshotId: prebuild, status },
            repoSnapshot: { snapshotId: repoSnap, status, provider: "modal" },
            baseSnapshotId: baseId,
          });
          if (session) expect(r).toMatchObject({ layer: "session", snapshotId: session });
          expect(r.snapshotHasDeps).toBe(snapshotHasDeps(r.layer));
          expect(r.snapshotId === null).toBe(r.layer === "base" || r.layer === "none");
          if (r.layer === "repo") expect(provider).toBe("modal");
        },
      ),
    );
  });

  it("snapshotHasDeps is true only for session and prebuild layers", () => {
    expect(["session", "prebuild", "repo", "base", "none"].map((l) => snapshotHasDeps(l as never))).toEqual([true, true, false, false, false]);
  });
});
