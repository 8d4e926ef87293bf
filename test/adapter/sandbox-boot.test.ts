/**
 * The boot's `start` and `resume` modes (what Modal and E2B exec in the image) on this machine:
 * real OpenCode, the development model, real git. `start` must return only once OpenCode
 * answers, leave the boot running detached, and report a failed step with its name.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { localBootSpec, sandboxEnv, sandboxPaths } from "../../functions/providers/local/opencode-launch";
import { allocatePort } from "../../functions/providers/local/host-commands";
import { groupPresent, killGroup } from "../../sandbox/shared/process-group";
import type { CreateSandboxOpts } from "../../functions/ports/sandbox-provider";
import { planBoot } from "../../sandbox/boot/boot-plan";
import type { BootSpec } from "../../sandbox/boot/boot-spec";

const TIMEOUT = 120_000;
const REPO_ROOT = resolve(fileURLToPath(import.meta.url), "../../..");
const BOOT_MAIN = join(REPO_ROOT, "sandbox/boot/main.ts");
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const OPENCODE = join(REPO_ROOT, "node_modules/.bin/opencode");

const dirs: string[] = [];
const groups: number[] = [];

afterAll(async () => {
  for (const pgid of groups) await killGroup(pgid);
  for (const d of dirs) await rm(d, { recursive: true, force: true });
}, TIMEOUT);

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

async function specFor(opts: Partial<CreateSandboxOpts>, extra: { restored?: boolean; gitFreshness?: BootSpec["request"]["gitFreshness"] } = {}) {
  const root = await tempDir("boot-start-");
  const paths = sandboxPaths(root, "sb");
  await mkdir(paths.workspace, { recursive: true });
  await mkdir(paths.home, { recursive: true });
  const spec = localBootSpec({
    opts: { sessionId: "ses_boot", repos: [], envVars: {}, ...opts },
    paths,
    restored: extra.restored ?? false,
    now: 1_750_000_000_000,
    repoRoot: REPO_ROOT,
    node: { bin: process.execPath, tsxLoaderUrl: TSX },
    opencodeBin: OPENCODE,
    openCodePort: await allocatePort(),
    devModelPort: await allocatePort(),
    sidecarPort: null,
    readinessBudgetMs: 60_000,
    timeoutSeconds: 600,
    gitFreshness: extra.gitFreshness ?? null,
  });
  const env = sandboxEnv({ hostPath: process.env.PATH ?? "/usr/bin:/bin", home: paths.home, sessionId: "ses_boot", sandboxId: "sb", providerEnv: {}, opts: { sessionId: "ses_boot", envVars: {} } });
  return { spec, paths, env };
}

/** Runs `boot <mode> --spec -` like a provider's exec: spec on stdin, waits for the exit. */
function runBoot(mode: "start" | "resume", spec: BootSpec, env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ["--import", TSX, BOOT_MAIN, mode, "--spec", "-"], { cwd, env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(JSON.stringify(spec));
  });
}

interface LogLine {
  msg: string;
  phase?: number;
  step?: string;
  outcome?: string;
  durationMs?: number;
  pid?: number;
}

async function bootLog(logDir: string): Promise<LogLine[]> {
  return (await readFile(join(logDir, "boot.log"), "utf8"))
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as LogLine);
}

/** Process group of a pid: OpenCode's is the detached boot's own group. */
function pgidOf(pid: number): number {
  return Number(execFileSync("ps", ["-o", "pgid=", "-p", String(pid)]).toString().trim());
}

describe("boot start (the image's entry for exec-based providers)", () => {
  it(
    "returns once OpenCode answers, with every phase-1 step timed in the log; the boot stays up detached",
    async () => {
      const { spec, paths, env } = await specFor({ systemPrompt: "Answer briefly." });
      const result = await runBoot("start", spec, env, paths.home);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      const ready = JSON.parse(result.stdout.trim()) as { type: string; openCodeUrl: string };
      expect(ready).toMatchObject({ type: "boot.ready", openCodeUrl: `http://127.0.0.1:${spec.layout.opencode.port}` });

      // Still serving after the starter exited: the boot detached.
      const sessions = await fetch(`${ready.openCodeUrl}/session`);
      expect(sessions.ok).toBe(true);
      const tools = (await (await fetch(`${ready.openCodeUrl}/experimental/tool/ids`)).json()) as string[];
      expect(tools).toEqual(expect.arrayContaining(["verify", "save_snapshot", "request_env_variables"]));
      expect(tools).not.toContain("save_service_commands");
      expect(tools).not.toContain("save_env_files");

      const lines = await bootLog(paths.root);
      const stepLines = lines.filter((l) => l.msg === "boot.step" && l.phase === 1);
      expect(stepLines.map((l) => l.step)).toEqual(planBoot(spec).phase1.map((s) => s.name));
      for (const l of stepLines) {
        expect(l.outcome).toBe("ok");
        expect(typeof l.durationMs).toBe("number");
      }
      expect(lines.some((l) => l.msg === "boot.ready")).toBe(true);

      const config = JSON.parse(await readFile(join(paths.home, ".config/opencode/opencode.json"), "utf8")) as { model: string; instructions: string[] };
      expect(config.model).toBe("dev/echo");
      expect(await readFile(config.instructions[0] ?? "", "utf8")).toBe("Answer briefly.");

      const opencodePid = stepLines.find((l) => l.step === "start opencode")?.pid ?? 0;
      const pgid = pgidOf(opencodePid);
      groups.push(pgid);
      expect(await killGroup(pgid)).toBe(true);
      expect(groupPresent(pgid)).toBe(false);
    },
    TIMEOUT,
  );

  it(
    "fails with the failed step's name and leaves nothing running",
    async () => {
      const { spec, paths, env } = await specFor({ repos: [{ url: `file://${join(tmpdir(), "no-such-repo-for-boot")}` }] });
      const result = await runBoot("start", spec, env, paths.home);
      expect(result.code).toBe(1);
      const failure = JSON.parse(result.stderr.trim().split("\n").at(-1) ?? "{}") as { type: string; step: string; error: string };
      expect(failure).toMatchObject({ type: "boot.failed", step: "clone no-such-repo-for-boot" });
      expect(failure.error).toMatch(/git clone .* exited/);
      const lines = await bootLog(paths.root);
      expect(lines.filter((l) => l.msg === "boot.step").map((l) => l.step)).toEqual(["clone no-such-repo-for-boot"]);
      // OpenCode was never started, and the boot itself exited.
      await expect(fetch(`http://127.0.0.1:${spec.layout.opencode.port}/session`)).rejects.toThrow();
      expect(lines.at(-1)?.msg).toBe("boot.failed");
    },
    TIMEOUT,
  );
});

describe("boot resume (git freshness on a resumed sandbox)", () => {
  it("pulls every repo and advances the cadence clock only when all pulls succeeded", async () => {
    const origin = await tempDir("boot-origin-");
    const git = (cwd: string, ...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args], {
        cwd,
        env: { PATH: process.env.PATH ?? "", HOME: origin, GIT_CONFIG_NOSYSTEM: "1" },
      }).toString();
    git(origin, "init", "--quiet");
    git(origin, "commit", "--quiet", "--allow-empty", "-m", "one");

    const { spec, paths, env } = await specFor({ repos: [{ url: `file://${origin}`, workspacePath: "app" }] }, { restored: true, gitFreshness: { enabled: true, cadenceSeconds: 0 } });
    git(paths.root, "clone", "--quiet", `file://${origin}`, paths.workspace + "/app");
    git(origin, "commit", "--quiet", "--allow-empty", "-m", "two");
    const metadataPath = join(paths.home, ".proliferate/metadata.json");
    const writeMetadata = (lastGitFetchAt: number) =>
      execFileSync("sh", ["-c", `mkdir -p '${join(paths.home, ".proliferate")}' && printf '%s' '{"sessionId":"s","repoDir":"x","createdAt":1,"lastGitFetchAt":${lastGitFetchAt}}' > '${metadataPath}'`]);
    writeMetadata(5);

    const ok = await runBoot("resume", spec, env, paths.root);
    expect(ok.code).toBe(0);
    expect(git(join(paths.workspace, "app"), "log", "--format=%s", "-1").trim()).toBe("two");
    expect(JSON.parse(await readFile(metadataPath, "utf8"))).toMatchObject({ lastGitFetchAt: spec.request.now });
    expect(ok.stdout).toContain('"step":"git freshness pull"');

    // A failed pull leaves the clock where it was, so the next resume retries.
    writeMetadata(5);
    await rm(origin, { recursive: true, force: true });
    const failed = await runBoot("resume", spec, env, paths.root);
    expect(failed.code).toBe(1);
    expect(JSON.parse(await readFile(metadataPath, "utf8"))).toMatchObject({ lastGitFetchAt: 5 });
  }, TIMEOUT);

  it("runs none of the agent's programs while pulling a repo it controls (hooks, fsmonitor, filters), and hands git no secret (issue 14 §2)", async () => {
    const origin = await tempDir("boot-origin-");
    const git = (cwd: string, ...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args], {
        cwd,
        env: { PATH: process.env.PATH ?? "", HOME: origin, GIT_CONFIG_NOSYSTEM: "1" },
      }).toString();
    git(origin, "init", "--quiet");
    await writeFile(join(origin, ".gitattributes"), "*.txt filter=evil\n");
    await writeFile(join(origin, "a.txt"), "one\n");
    git(origin, "add", ".");
    git(origin, "commit", "--quiet", "-m", "one");

    const { spec, paths, env } = await specFor({ repos: [{ url: `file://${origin}`, workspacePath: "app" }] }, { restored: true, gitFreshness: { enabled: true, cadenceSeconds: 0 } });
    const repo = join(paths.workspace, "app");
    git(paths.root, "clone", "--quiet", `file://${origin}`, repo);
    await writeFile(join(origin, "a.txt"), "two\n");
    git(origin, "commit", "--quiet", "-am", "two");
    // The agent's doing: every way .git/ lets it run a program during a pull.
    const leaks = await tempDir("boot-leaks-");
    const dumper = join(leaks, "dump.sh");
    await writeFile(dumper, `#!/bin/sh\nenv > "${leaks}/ran-$$.env"\n`, { mode: 0o755 });
    // A filter must pass the content through; a hook or fsmonitor must not wait on its stdin.
    const filter = join(leaks, "filter.sh");
    await writeFile(filter, `#!/bin/sh\n"${dumper}" </dev/null\nexec cat\n`, { mode: 0o755 });
    for (const [key, value] of [["core.fsmonitor", dumper], ["filter.evil.clean", filter], ["filter.evil.smudge", filter], ["filter.evil.required", "true"]]) git(repo, "config", key ?? "", value ?? "");
    for (const hook of ["post-merge", "post-checkout", "reference-transaction", "post-index-change"]) {
      await writeFile(join(repo, ".git", "hooks", hook), `#!/bin/sh\nexec "${dumper}" </dev/null\n`, { mode: 0o755 });
    }

    const secretEnv = { ...env, ANTHROPIC_API_KEY: "sk-ant-api03-boot-pull-test-key-0123456789", SIDECAR_TOKEN: "a-stray-sandbox-key-0123456789" };
    const result = await runBoot("resume", spec, secretEnv, paths.root);
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(git(repo, "log", "--format=%s", "-1").trim()).toBe("two");
    expect(await readFile(join(repo, "a.txt"), "utf8")).toBe("two\n");
    expect((await readdir(leaks)).filter((f) => f.startsWith("ran-"))).toEqual([]);
  }, TIMEOUT);
});
