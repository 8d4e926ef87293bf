/**
 * Real git through the CLI's credential helper (issue 23): a git smart-HTTP server demanding
 * basic auth, a sidecar with its socket and a fake control plane holding the password, and
 * `git clone` / `git push` with `credential.helper=!node ... git-credential --socket <sock>`,
 * as the boot configures it. The clone and the push succeed, the password is nowhere in the
 * clone; when the control plane has no credential, git fails at once instead of prompting.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Sidecar } from "../../sandbox/sidecar/server";
import { credentialAnswer, startFakeControlPlane, type FakeControlPlane } from "../support/fake-control-plane";
import { startGitHttpServer, type GitHttpServer } from "../support/git-http-server";
import { shortSocketPath } from "../support/sidecar-socket";
import { git, makeTree, startTestSidecar, type TestTree } from "./sidecar-harness";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const CLI = resolve("sandbox/cli/main.ts");
const USERNAME = "x-access-token";
const PASSWORD = `ghs_${randomBytes(12).toString("hex")}`;
const GIT_TIMEOUT_MS = 25_000;

let tree: TestTree;
let root: string;
let server: GitHttpServer;
let cp: FakeControlPlane;
let sidecar: Sidecar;
let socketPath: string;
let logLines: string[];

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
/** The helper exactly as the boot configures it (with the tsx loader standing in for the bundle). */
const helper = () => `!${sh(process.execPath)} --import ${sh(TSX)} ${sh(CLI)} git-credential --socket ${sh(socketPath)}`;

/** git isolated from the host's config, never prompting; async, since the sidecar and both servers run in this process. */
function runGit(cwd: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }> {
  return new Promise((done, reject) => {
    const child = spawn("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", `credential.helper=${helper()}`, ...args], {
      cwd,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: join(root, "home"),
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CONFIG_GLOBAL: "/dev/null",
        GIT_TERMINAL_PROMPT: "0",
        LANG: "C",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, GIT_TIMEOUT_MS);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr, timedOut });
    });
  });
}

async function filesContaining(dir: string, needle: string): Promise<string[]> {
  const hits: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = join(entry.parentPath, entry.name);
    if ((await readFile(file)).includes(needle)) hits.push(file);
  }
  return hits;
}

beforeAll(async () => {
  tree = await makeTree();
  root = await realpath(await mkdtemp(join(tmpdir(), "git-http-")));
  await mkdir(join(root, "home"));
  // The origin: a bare repository with one commit, pushed over a plain file path.
  git(root, "init", "-q", "--bare", "-b", "main", "repo.git");
  await mkdir(join(root, "seed"));
  git(join(root, "seed"), "init", "-q", "-b", "main");
  await writeFile(join(root, "seed", "README.md"), "# private app\n");
  git(join(root, "seed"), "add", ".");
  git(join(root, "seed"), "commit", "-q", "-m", "initial");
  git(join(root, "seed"), "push", "-q", join(root, "repo.git"), "main");

  server = await startGitHttpServer({ root, username: USERNAME, password: PASSWORD });
  cp = await startFakeControlPlane();
  socketPath = shortSocketPath();
  logLines = [];
  sidecar = await startTestSidecar(tree, {
    socketPath,
    controlPlaneUrl: cp.url,
    log: (message, fields) => logLines.push(JSON.stringify({ message, ...fields })),
  });
});

afterAll(async () => {
  await sidecar?.close();
  await server?.close();
  await cp?.close();
  await tree?.cleanup();
  if (root) await rm(root, { recursive: true, force: true });
});

beforeEach(() => {
  cp.calls.length = 0;
  server.requests.length = 0;
});

describe("git over HTTP with the sidecar as credential helper", () => {
  it("clones and pushes a private repository; the password stays out of the clone", async () => {
    cp.gitCredential = () => credentialAnswer(PASSWORD, Date.now() + 3_600_000, USERNAME);
    const url = `${server.url}/repo.git`;

    // Without a helper answer git could not authenticate: the server demands auth on every request.
    const cloned = await runGit(root, ["-c", "credential.useHttpPath=true", "clone", "-q", url, "clone"]);
    expect(cloned, `${cloned.stderr}\n${server.backendErrors.join("")}`).toMatchObject({ code: 0, timedOut: false });
    expect(await readFile(join(root, "clone", "README.md"), "utf8")).toBe("# private app\n");

    const config = await readFile(join(root, "clone", ".git", "config"), "utf8");
    expect(config).toContain(`url = ${url}`);
    expect(config).not.toContain(PASSWORD);
    expect(await filesContaining(join(root, "clone"), PASSWORD)).toEqual([]);
    expect(await filesContaining(join(root, "home"), PASSWORD)).toEqual([]);

    expect(server.requests.some((r) => r.authorized)).toBe(true);
    expect(server.requests.filter((r) => r.authorizationHeaderPresent && !r.authorized)).toEqual([]);
    const host = new URL(server.url).host;
    expect(cp.calls.map((c) => c.body)).toEqual([{ protocol: "http", host, path: "repo.git" }]);

    // Push a new commit through the same helper (the sidecar serves it from memory now).
    await writeFile(join(root, "clone", "CHANGE.md"), "pushed through the helper\n");
    expect((await runGit(join(root, "clone"), ["add", "CHANGE.md"])).code).toBe(0);
    expect((await runGit(join(root, "clone"), ["commit", "-q", "-m", "change"])).code).toBe(0);
    const pushed = await runGit(join(root, "clone"), ["-c", "credential.useHttpPath=true", "push", "-q", "origin", "main"]);
    expect(pushed, `${pushed.stderr}\n${server.backendErrors.join("")}`).toMatchObject({ code: 0, timedOut: false });
    const head = (await runGit(join(root, "clone"), ["rev-parse", "HEAD"])).stdout.trim();
    expect(git(join(root, "repo.git"), "rev-parse", "main").trim()).toBe(head);
    expect(server.requests.some((r) => r.authorized && r.path.includes("git-receive-pack"))).toBe(true);
    expect(cp.calls).toHaveLength(1);

    expect(await filesContaining(join(root, "clone"), PASSWORD)).toEqual([]);
    expect(logLines.join("\n")).not.toContain(PASSWORD);
  });

  it("fails the clone without prompting or hanging when the control plane has no credential", async () => {
    cp.gitCredential = () => ({ status: 404 });
    const failed = await runGit(root, ["clone", "-q", `${server.url}/repo.git`, "denied"]);
    expect(failed.timedOut).toBe(false);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toContain(`git-credential: no credential for http://${new URL(server.url).host}: 404 no_credential`);
    expect(failed.stderr).toMatch(/terminal prompts disabled|Authentication failed/);
    expect(server.requests.filter((r) => r.authorized)).toEqual([]);
    expect(cp.calls).toHaveLength(1);
  });
});
