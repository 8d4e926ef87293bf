/**
 * `env apply` / `env scrub` through `runCli` on a temp workspace with real git repos (no
 * sockets): files written with the resolved values and mode 0600, excluded from git once, pass 1
 * writing nothing when any file has a problem (missing key, path outside the workspace, a
 * symlinked parent pointing out), a symlink at the target replaced rather than followed, and
 * scrub removing both the files and their exclude lines.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { lstat, mkdir, mkdtemp, readFile, realpath, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../sandbox/cli/cli";

let root: string;
let ws: string;
let outside: string;

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", ...args], { cwd, encoding: "utf8" });
}

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "cli-env-")));
  ws = join(root, "workspace");
  outside = join(root, "outside");
  for (const repo of ["app", "api"]) {
    await mkdir(join(ws, repo), { recursive: true });
    git(join(ws, repo), "init", "-q");
  }
  await mkdir(outside);
  await symlink("../outside", join(ws, "escape"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function env(args: string[], vars: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(["env", ...args], {
    env: { WORKSPACE_DIR: ws, ENV_VALUES_FILE: join(root, "no-values.json"), ...vars },
    out: (l) => out.push(l),
    err: (l) => err.push(l),
  });
  return { code, out, err };
}

async function writeSpec(spec: unknown): Promise<string> {
  const file = join(root, `spec-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify(spec));
  return file;
}

const SPEC = [
  { path: "app/.env.local", format: "dotenv", keys: [{ name: "DATABASE_URL" }, { name: "LOG_LEVEL", required: false, value: "info" }] },
  { path: "api/config/secrets.json", format: "json", keys: [{ name: "STRIPE_KEY" }] },
];

const exclude = (repo: string) => readFile(join(ws, repo, ".git", "info", "exclude"), "utf8");

describe("env apply", () => {
  it("writes every file from the values file and the environment, excluded from git", async () => {
    const values = join(root, "values.json");
    await writeFile(values, JSON.stringify({ DATABASE_URL: "postgres://db/app" }));
    const { code, out } = await env(["apply", "--spec", await writeSpec(SPEC), "--values", values], { STRIPE_KEY: "sk_test_1" });
    expect(code).toBe(0);
    expect(out).toEqual(["wrote app/.env.local (2 keys)", "wrote api/config/secrets.json (1 keys)"]);

    const dotenv = await readFile(join(ws, "app", ".env.local"), "utf8");
    expect(dotenv.split("\n").filter((l) => !l.startsWith("#"))).toEqual(["DATABASE_URL=postgres://db/app", "LOG_LEVEL=info", ""]);
    expect(JSON.parse(await readFile(join(ws, "api", "config", "secrets.json"), "utf8"))).toEqual({ STRIPE_KEY: "sk_test_1" });
    expect((await stat(join(ws, "app", ".env.local"))).mode & 0o777).toBe(0o600);

    expect((await exclude("app")).split("\n")).toContain("/.env.local");
    expect((await exclude("api")).split("\n")).toContain("/config/secrets.json");
    // git itself agrees: the generated files are not untracked changes.
    expect(git(join(ws, "app"), "status", "--porcelain", "--untracked-files=all")).toBe("");
    expect(git(join(ws, "api"), "status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  it("is idempotent: applying again updates values and adds no second exclude line", async () => {
    const spec = await writeSpec(SPEC);
    expect((await env(["apply", "--spec", spec], { DATABASE_URL: "one", STRIPE_KEY: "k" })).code).toBe(0);
    expect((await env(["apply", "--spec", spec], { DATABASE_URL: "two", STRIPE_KEY: "k" })).code).toBe(0);
    expect((await exclude("app")).split("\n").filter((l) => l === "/.env.local")).toHaveLength(1);
    expect(await readFile(join(ws, "app", ".env.local"), "utf8")).toContain("DATABASE_URL=two");
  });

  it("writes nothing when a required key of a later file is missing, and names every missing key", async () => {
    const spec = [...SPEC, { path: "app/other.env", keys: [{ name: "ALSO_MISSING" }] }];
    const { code, err } = await env(["apply", "--spec", await writeSpec(spec)], { DATABASE_URL: "present" });
    expect(code).toBe(1);
    expect(err).toEqual([
      "env apply failed; nothing was changed:",
      "  api/config/secrets.json: required key STRIPE_KEY has no value",
      "  app/other.env: required key ALSO_MISSING has no value",
    ]);
    expect(existsSync(join(ws, "app", ".env.local"))).toBe(false);
    expect(existsSync(join(ws, "api", "config"))).toBe(false);
    expect(existsSync(join(ws, "app", ".git", "info", "exclude")) ? await exclude("app") : "").not.toContain(".env.local");
  });

  it.each([
    ["..", "../escaped.env"],
    ["an absolute path outside", "/tmp/escaped-by-sandbox-cli-test.env"],
    ["a symlinked directory pointing out", "escape/.env"],
    ["a new directory below a symlink pointing out", "escape/deeper/.env"],
    ["a path ending in ..", "app/.."],
  ])("refuses %s and writes no file at all", async (_label, path) => {
    const spec = [SPEC[0], { path, keys: [{ name: "DATABASE_URL" }] }];
    const { code, err } = await env(["apply", "--spec", await writeSpec(spec)], { DATABASE_URL: "x" });
    expect(code).toBe(1);
    expect(err.join("\n")).toContain(path);
    expect(existsSync(join(ws, "app", ".env.local"))).toBe(false);
    expect(existsSync("/tmp/escaped-by-sandbox-cli-test.env")).toBe(false);
    expect(existsSync(join(root, "escaped.env"))).toBe(false);
    expect(existsSync(join(outside, ".env"))).toBe(false);
    expect(existsSync(join(outside, "deeper"))).toBe(false);
  });

  it("replaces a symlink planted at the target instead of writing through it", async () => {
    const victim = join(outside, "victim.txt");
    await writeFile(victim, "untouched");
    await symlink(victim, join(ws, "app", ".env.local"));
    const { code } = await env(["apply", "--spec", await writeSpec([SPEC[0]])], { DATABASE_URL: "x" });
    expect(code).toBe(0);
    expect(await readFile(victim, "utf8")).toBe("untouched");
    expect((await lstat(join(ws, "app", ".env.local"))).isSymbolicLink()).toBe(false);
  });

  it("writes a file outside any repository without excluding it", async () => {
    const { code, out } = await env(["apply", "--spec", JSON.stringify([{ path: "loose/.env", keys: [{ name: "K", value: "v" }] }])]);
    expect(code).toBe(0);
    expect(out[0]).toContain("not inside a git repository");
    expect(await readFile(join(ws, "loose", ".env"), "utf8")).toContain("K=v");
  });

  it("answers usage errors with exit 2", async () => {
    expect((await env(["apply"])).code).toBe(2);
    expect((await env(["explode", "--spec", "x"])).code).toBe(2);
    expect((await env(["apply", "--spec", "x", "--bogus"])).code).toBe(2);
  });

  it("reports a malformed spec or values file with exit 1", async () => {
    expect((await env(["apply", "--spec", JSON.stringify([{ path: "a", keys: [{ name: "9x" }] }])])).code).toBe(1);
    expect((await env(["apply", "--spec", await writeSpec(SPEC), "--values", join(root, "missing.json")])).code).toBe(1);
  });
});

describe("env scrub", () => {
  it("deletes the generated files and their exclude lines, keeping other exclude lines", async () => {
    const spec = await writeSpec(SPEC);
    await writeFile(join(ws, "app", ".git", "info", "exclude"), "*.swp\n");
    expect((await env(["apply", "--spec", spec], { DATABASE_URL: "x", STRIPE_KEY: "y" })).code).toBe(0);
    const { code, out } = await env(["scrub", "--spec", spec]);
    expect(code).toBe(0);
    expect(out).toEqual(["removed app/.env.local", "removed api/config/secrets.json"]);
    expect(existsSync(join(ws, "app", ".env.local"))).toBe(false);
    expect(existsSync(join(ws, "api", "config", "secrets.json"))).toBe(false);
    expect(await exclude("app")).toBe("*.swp\n");
    expect(await exclude("api")).not.toContain("secrets.json");
    // Scrubbing again is harmless.
    expect((await env(["scrub", "--spec", spec])).code).toBe(0);
  });

  it("refuses a spec with a path outside the workspace before deleting anything", async () => {
    await writeFile(join(ws, "app", ".env.local"), "keep");
    await writeFile(join(outside, ".env"), "keep");
    const spec = await writeSpec([SPEC[0], { path: "escape/.env", keys: [] }]);
    const { code } = await env(["scrub", "--spec", spec]);
    expect(code).toBe(1);
    expect(await readFile(join(ws, "app", ".env.local"), "utf8")).toBe("keep");
    expect(await readFile(join(outside, ".env"), "utf8")).toBe("keep");
  });

  it("removes a symlink at the target, never the file it points to", async () => {
    const victim = join(ws, "api", "real.txt");
    await writeFile(victim, "keep");
    await symlink(victim, join(ws, "app", ".env.local"));
    expect((await env(["scrub", "--spec", await writeSpec([SPEC[0]])])).code).toBe(0);
    expect(existsSync(join(ws, "app", ".env.local"))).toBe(false);
    expect(await readFile(victim, "utf8")).toBe("keep");
  });
});
