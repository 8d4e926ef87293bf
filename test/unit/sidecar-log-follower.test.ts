/**
 * The log follower behind the SSE stream, on real temp files (no sockets): tail of complete
 * lines, following appended lines (partial lines held until complete), and truncation.
 */
import { appendFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completeLines, LogFollower, readTail } from "../../sandbox/sidecar/log-follower";

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "log-follow-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function waitUntil(predicate: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("completeLines", () => {
  it("returns only newline-terminated lines and how many bytes they span", () => {
    expect(completeLines(Buffer.from("a\nb\r\npart"))).toEqual({ lines: ["a", "b"], consumed: 5 });
    expect(completeLines(Buffer.from("partial"))).toEqual({ lines: [], consumed: 0 });
  });
});

describe("readTail", () => {
  it("returns the last complete lines within the byte budget, starting at a line boundary", async () => {
    const file = join(dir, "tail.log");
    await writeFile(file, "first line\nsecond line\nthird line\npartial");
    expect(await readTail(file)).toEqual({ lines: ["first line", "second line", "third line"], offset: 34 });
    // 20 bytes from the end start mid "second line": that partial line is dropped.
    expect((await readTail(file, 20)).lines).toEqual(["third line"]);
  });
});

describe("LogFollower", () => {
  it("delivers appended lines once complete, in order, and restarts after truncation", async () => {
    const file = join(dir, "follow.log");
    await writeFile(file, "old\n");
    const { offset } = await readTail(file);
    const seen: string[] = [];
    const follower = new LogFollower(file, offset, (lines) => seen.push(...lines));
    follower.start();
    try {
      await appendFile(file, "one\ntw");
      await waitUntil(() => seen.includes("one"), "line one");
      expect(seen).toEqual(["one"]);
      await appendFile(file, "o\nthree\n");
      await waitUntil(() => seen.includes("three"), "line three");
      expect(seen).toEqual(["one", "two", "three"]);
      await writeFile(file, "fresh\n");
      await waitUntil(() => seen.includes("fresh"), "the truncated file's first line");
      expect(seen).not.toContain("old");
    } finally {
      follower.stop();
    }
  });
});
