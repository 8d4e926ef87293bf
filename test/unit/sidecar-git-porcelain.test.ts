/** Parsing `git status --porcelain=v2 --branch -z` and the UTF-8-safe cap used for diffs. */
import { describe, expect, it } from "vitest";
import { capUtf8, parsePorcelainV2 } from "../../sandbox/sidecar/git-porcelain";

const SHA = "1234567890abcdef1234567890abcdef12345678";
const MODES = "100644 100644 100644";

describe("parsePorcelainV2", () => {
  it("reads branch headers, changes, renames, conflicts, untracked and ignored entries", () => {
    const output = [
      `# branch.oid ${SHA}`,
      "# branch.head feature/x",
      "# branch.upstream origin/feature/x",
      "# branch.ab +2 -1",
      `1 .M N... ${MODES} ${SHA} ${SHA} src/with space.ts`,
      `1 A. N... 000000 100644 100644 ${SHA} ${SHA} added.ts`,
      `2 R. N... ${MODES} ${SHA} ${SHA} R100 new name.ts`,
      "old name.ts",
      `u UU N... ${MODES} 100644 ${SHA} ${SHA} ${SHA} conflict.ts`,
      "? untracked dir/file.txt",
      "! ignored.log",
      "",
    ].join("\0");
    expect(parsePorcelainV2(output)).toEqual({
      branch: { oid: SHA, head: "feature/x", upstream: "origin/feature/x", ahead: 2, behind: 1 },
      files: [
        { path: "src/with space.ts", kind: "changed", index: ".", worktree: "M" },
        { path: "added.ts", kind: "changed", index: "A", worktree: "." },
        { path: "new name.ts", kind: "renamed", index: "R", worktree: ".", origPath: "old name.ts" },
        { path: "conflict.ts", kind: "unmerged", index: "U", worktree: "U" },
        { path: "untracked dir/file.txt", kind: "untracked", index: "?", worktree: "?" },
        { path: "ignored.log", kind: "ignored", index: "!", worktree: "!" },
      ],
    });
  });

  it("reports an unborn or detached head as null", () => {
    const status = parsePorcelainV2(["# branch.oid (initial)", "# branch.head (detached)", ""].join("\0"));
    expect(status.branch).toEqual({ oid: null, head: null, upstream: null, ahead: null, behind: null });
    expect(status.files).toEqual([]);
  });

  it("rejects a record it does not understand rather than guessing", () => {
    expect(() => parsePorcelainV2("x nonsense\0")).toThrow(/unknown porcelain/);
    expect(() => parsePorcelainV2("1 .M\0")).toThrow(/malformed/);
  });
});

describe("capUtf8", () => {
  it("keeps short buffers whole", () => {
    const buf = Buffer.from("héllo");
    expect(capUtf8(buf, 100)).toBe(buf);
  });

  it("cuts at the cap on ASCII", () => {
    expect(capUtf8(Buffer.from("abcdef"), 4).toString()).toBe("abcd");
  });

  it("never splits a multi-byte character", () => {
    const text = "ab😀cd"; // 😀 is 4 bytes: a b [f0 9f 98 80] c d
    for (let cap = 2; cap <= 6; cap++) {
      const kept = capUtf8(Buffer.from(text), cap).toString("utf8");
      expect(kept).not.toContain("\uFFFD");
      expect(text.startsWith(kept)).toBe(true);
      expect(kept).toBe(cap < 6 ? "ab" : "ab😀");
    }
  });
});
