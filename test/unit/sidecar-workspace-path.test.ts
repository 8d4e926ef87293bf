/**
 * The path rule shared by the sidecar and the CLI: everything resolves inside the workspace
 * after symlinks are dereferenced. Real directories and symlinks in a temp tree (no sockets).
 */
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isInside, NotAFileError, OutsideWorkspaceError, PathNotFoundError, resolveInsideWorkspace, resolveInsideWorkspaceLexically, splitFilePath } from "../../sandbox/shared/workspace-path";

let root: string;
let ws: string;
let outside: string;

beforeAll(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ws-path-")));
  ws = join(root, "workspace");
  outside = join(root, "outside");
  await mkdir(join(ws, "app", "src"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(outside, "secret"), "s");
  await writeFile(join(ws, "app", "file.txt"), "f");
  await symlink("../outside", join(ws, "escape-dir"));
  await symlink(join(outside, "secret"), join(ws, "escape-file"));
  await symlink("app/src", join(ws, "inner-link"));
  // A sibling whose name shares the workspace's prefix must not count as inside it.
  await mkdir(join(root, "workspace-evil"));
  // The workspace itself reached through a symlink.
  await symlink(ws, join(root, "ws-link"));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("resolveInsideWorkspace", () => {
  it("resolves relative and absolute paths inside the workspace to real paths", async () => {
    expect(await resolveInsideWorkspace(ws, "app/file.txt")).toBe(join(ws, "app", "file.txt"));
    expect(await resolveInsideWorkspace(ws, ".")).toBe(ws);
    expect(await resolveInsideWorkspace(ws, join(ws, "app"))).toBe(join(ws, "app"));
    expect(await resolveInsideWorkspace(ws, "app/src/../file.txt")).toBe(join(ws, "app", "file.txt"));
    expect(await resolveInsideWorkspace(ws, "inner-link")).toBe(join(ws, "app", "src"));
  });

  it("accepts a path that does not exist yet under a real parent", async () => {
    expect(await resolveInsideWorkspace(ws, "app/new/deeper/.env")).toBe(join(ws, "app", "new", "deeper", ".env"));
  });

  it.each([
    ["..", ".."],
    ["../outside/secret", "../outside/secret"],
    ["app/../../outside", "app/../../outside"],
    ["a prefix-sharing sibling", "../workspace-evil"],
    ["an absolute path elsewhere", "/etc/passwd"],
    ["a directory symlink pointing out", "escape-dir"],
    ["a file below a directory symlink pointing out", "escape-dir/secret"],
    ["a new file below a directory symlink pointing out", "escape-dir/new/.env"],
    ["a file symlink pointing out", "escape-file"],
  ])("refuses %s", async (_label, requested) => {
    await expect(resolveInsideWorkspace(ws, requested)).rejects.toBeInstanceOf(OutsideWorkspaceError);
  });

  it("refuses absolute paths to the outside given in real or symlinked form", async () => {
    await expect(resolveInsideWorkspace(ws, outside)).rejects.toBeInstanceOf(OutsideWorkspaceError);
    await expect(resolveInsideWorkspace(ws, join(ws, "escape-dir"))).rejects.toBeInstanceOf(OutsideWorkspaceError);
    await expect(resolveInsideWorkspace(ws, "app\0/../../outside")).rejects.toBeInstanceOf(OutsideWorkspaceError);
  });

  it("works when the workspace itself is reached through a symlink", async () => {
    const link = join(root, "ws-link");
    expect(await resolveInsideWorkspace(link, "app")).toBe(join(ws, "app"));
    expect(await resolveInsideWorkspace(link, join(link, "app"))).toBe(join(ws, "app"));
    await expect(resolveInsideWorkspace(link, "escape-dir")).rejects.toBeInstanceOf(OutsideWorkspaceError);
  });

  it("with mustExist, refuses a missing path as not found", async () => {
    await expect(resolveInsideWorkspace(ws, "nope", { mustExist: true })).rejects.toBeInstanceOf(PathNotFoundError);
    expect(await resolveInsideWorkspace(ws, "app", { mustExist: true })).toBe(join(ws, "app"));
  });
});

describe("isInside", () => {
  it("compares whole path components", () => {
    expect(isInside("/w", "/w")).toBe(true);
    expect(isInside("/w", "/w/a")).toBe(true);
    expect(isInside("/w", "/wx")).toBe(false);
    expect(isInside("/w", "/")).toBe(false);
  });
});

describe("the lexical rule and file names, as the boot, the CLI and the API apply them", () => {
  it("resolveInsideWorkspaceLexically joins inside paths and refuses leaving ones and NUL", () => {
    expect(resolveInsideWorkspaceLexically("/w", "app/../lib")).toBe("/w/lib");
    expect(resolveInsideWorkspaceLexically("/w", ".")).toBe("/w");
    for (const bad of ["..", "../x", "app/../../x", "../../../../tmp/x", "/etc", "a\0b"]) {
      expect(() => resolveInsideWorkspaceLexically("/w", bad), bad).toThrow(OutsideWorkspaceError);
    }
  });

  it("splitFilePath refuses paths that name no file", () => {
    expect(splitFilePath("app/.env")).toEqual({ dir: "app", name: ".env" });
    expect(splitFilePath(".env")).toEqual({ dir: ".", name: ".env" });
    for (const bad of ["", ".", "..", "app/", "app/..", "app/."]) expect(() => splitFilePath(bad), bad).toThrow(NotAFileError);
  });
});
