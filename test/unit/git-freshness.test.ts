import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { metadataAfterPull, shouldPullOnRestore, type ShouldPullInput } from "../../functions/domain/git-freshness";

const NOW = 1_750_000_000_000;
const base: ShouldPullInput = { enabled: true, cadenceSeconds: 600, hasSnapshot: true, repoCount: 1, lastGitFetchAt: NOW - 601_000, now: NOW };

describe("shouldPullOnRestore", () => {
  it.each<[string, Partial<ShouldPullInput>, boolean]>([
    ["disabled", { enabled: false }, false],
    ["no snapshot (fresh clone)", { hasSnapshot: false }, false],
    ["no repos", { repoCount: 0 }, false],
    ["cadence 0 always pulls", { cadenceSeconds: 0, lastGitFetchAt: NOW }, true],
    ["legacy metadata without lastGitFetchAt", { lastGitFetchAt: null }, true],
    ["cadence elapsed", {}, true],
    ["exactly at the cadence boundary", { lastGitFetchAt: NOW - 600_000 }, true],
    ["inside the cadence window", { lastGitFetchAt: NOW - 599_999 }, false],
  ])("%s", (_name, over, expected) => {
    expect(shouldPullOnRestore({ ...base, ...over })).toBe(expected);
  });

  it("law: once the cadence window has elapsed, every later restore pulls too", () => {
    fc.assert(
      fc.property(fc.nat(86_400), fc.nat(10_000_000), fc.nat(10_000_000), (cadence, offset, later) => {
        const input = { ...base, cadenceSeconds: cadence, lastGitFetchAt: NOW, now: NOW + offset };
        if (shouldPullOnRestore(input)) expect(shouldPullOnRestore({ ...input, now: input.now + later })).toBe(true);
      }),
    );
  });

  it("law: never pulls when disabled or not restoring", () => {
    fc.assert(
      fc.property(fc.nat(86_400), fc.option(fc.nat()), fc.nat(), fc.nat(5), (cadence, last, now, repos) => {
        const input = { cadenceSeconds: cadence, lastGitFetchAt: last, now, repoCount: repos };
        expect(shouldPullOnRestore({ ...input, enabled: false, hasSnapshot: true })).toBe(false);
        expect(shouldPullOnRestore({ ...input, enabled: true, hasSnapshot: false })).toBe(false);
      }),
    );
  });
});

describe("metadataAfterPull", () => {
  const metadata = { sessionId: "ses_x", repoDir: "/home/user/workspace", createdAt: 1, lastGitFetchAt: 5 };

  it("advances lastGitFetchAt only when every pull succeeded", () => {
    expect(metadataAfterPull(metadata, [true, true], NOW)).toEqual({ ...metadata, lastGitFetchAt: NOW });
    expect(metadataAfterPull(metadata, [true, false], NOW)).toBe(metadata);
    expect(metadataAfterPull(metadata, [], NOW)).toBe(metadata);
  });

  it("law: the cadence moves iff the results are non-empty and all true", () => {
    fc.assert(
      fc.property(fc.array(fc.boolean()), fc.nat(), (results, now) => {
        const next = metadataAfterPull(metadata, results, now);
        const allOk = results.length > 0 && results.every(Boolean);
        expect(next.lastGitFetchAt).toBe(allOk ? now : metadata.lastGitFetchAt);
        expect({ ...next, lastGitFetchAt: 0 }).toEqual({ ...metadata, lastGitFetchAt: 0 });
      }),
    );
  });
});
