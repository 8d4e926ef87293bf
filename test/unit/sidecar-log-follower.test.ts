/**
 * The log follower behind the SSE stream, on real temp files (no sockets): tail of complete
 * lines, following appended lines (partial lines held until complete), and truncation.
 */
import { appendFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completeLines, LogFollower, readTail } from "../../sandbox/sidecar/log-follower";
import { waitFor } from "../support/wait-for";

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "log-follow-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

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
      await waitFor(() => seen.includes("one"), { message: "line one" });
      expect(seen).toEqual(["one"]);
      await appendFile(file, "o\nthree\n");
      await waitFor(() => seen.includes("three"), { message: "line three" });
      expect(seen).toEqual(["one", "two", "three"]);
      await writeFile(file, "fresh\n");
      await waitFor(() => seen.includes("fresh"), { message: "the truncated file's first line" });
      expect(seen).not.toContain("old");
    } finally {
      follower.stop();
    }
  });
});
