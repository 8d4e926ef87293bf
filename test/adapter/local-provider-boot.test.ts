/**
 * The local provider boots through sandbox/boot (the one boot implementation): the sandbox's
 * process-group leader is the boot, its log has every step timed, the session type decides the
 * tools, a restored sandbox reads the snapshot's metadata instead of cloning, and the optional
 * sidecar starts in phase 2 and dies with the sandbox. Real processes; every sandbox is
 * terminated in afterAll.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { readSandboxRecord } from "../../functions/providers/local/sandbox-registry";

const TIMEOUT = 120_000;

let dataDir: string;
const started: { sessionId: string; sandboxId: string }[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "local-boot-"));
});

afterAll(async () => {
  const cleanup = new LocalSandboxProvider({ dataDir });
  for (const s of started) await cleanup.terminate(s.sessionId, s.sandboxId).catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
}, TIMEOUT);

interface LogLine {
  msg: string;
  phase?: number;
  step?: string;
  outcome?: string;
  durationMs?: number;
}

function logOf(sandboxId: string): LogLine[] {
  return readFileSync(join(dataDir, "sandboxes", sandboxId, "sandbox.log"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as LogLine);
}

/** Bounded wait on a condition (phase 2 runs after create returns). */
async function eventually<T>(what: string, probe: () => Promise<T | null> | T | null, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function commandOf(pid: number): string {
  return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
}

function groupGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

describe("local provider boots through sandbox/boot", () => {
  it(
    "a setup session: the boot leads the group, gets the setup-only tools and the prompt; the sidecar runs and dies with the sandbox",
    async () => {
      const provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000, sidecar: true });
      const sandbox = await provider.createSandbox({ sessionId: "ses_setup", repos: [], envVars: { SIDECAR_TOKEN: "test-token-123" }, sessionType: "setup", systemPrompt: "You set up repos." });
      started.push({ sessionId: "ses_setup", sandboxId: sandbox.sandboxId });
      const record = await readSandboxRecord(dataDir, sandbox.sandboxId);
      if (!record) throw new Error("no registry record");

      // The group leader is the boot process itself, not OpenCode or a shell.
      expect(commandOf(record.pgid)).toContain("sandbox/boot/main.ts run --spec");

      const lines = logOf(sandbox.sandboxId);
      const phase1 = lines.filter((l) => l.msg === "boot.step" && l.phase === 1);
      expect(phase1.map((l) => l.step)).toEqual([
        "write metadata",
        "write opencode config",
        "write plugin",
        "write tools",
        "write instructions",
        "start dev model",
        "start opencode",
        "wait for opencode",
      ]);
      expect(phase1.every((l) => l.outcome === "ok" && typeof l.durationMs === "number")).toBe(true);

      const tools = (await (await fetch(`${sandbox.tunnelUrl}/experimental/tool/ids`)).json()) as string[];
      expect(tools).toEqual(expect.arrayContaining(["verify", "save_snapshot", "request_env_variables", "save_service_commands", "save_env_files"]));
      const config = JSON.parse(readFileSync(join(record.home, ".config/opencode/opencode.json"), "utf8")) as { instructions: string[] };
      expect(readFileSync(config.instructions[0] ?? "", "utf8")).toBe("You set up repos.");

      // Phase 2 (after create returned): the sidecar answers, with the session's token.
      const sidecarPort = record.sidecarPort;
      expect(sidecarPort).not.toBeNull();
      await eventually("the sidecar", async () => ((await fetch(`http://127.0.0.1:${sidecarPort}/health`).catch(() => null))?.ok ? true : null));
      const services = await fetch(`http://127.0.0.1:${sidecarPort}/services`, { headers: { authorization: "Bearer test-token-123" } });
      expect(services.status).toBe(200);
      const waited = await eventually("the boot's sidecar step", () => logOf(sandbox.sandboxId).find((l) => l.step === "wait for sidecar") ?? null);
      expect(waited).toMatchObject({ phase: 2, outcome: "ok" });

      await provider.terminate("ses_setup", sandbox.sandboxId);
      expect(groupGone(record.pgid)).toBe(true);
      await expect(fetch(`http://127.0.0.1:${sidecarPort}/health`)).rejects.toThrow();
    },
    TIMEOUT,
  );

  it(
    "a coding session restored from a snapshot of a setup session: no clone, the snapshot's metadata is read, setup-only tools are gone",
    async () => {
      const origin = await mkdtemp(join(tmpdir(), "local-boot-origin-"));
      try {
        const git = (...args: string[]) =>
          execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args], {
            cwd: origin,
            env: { PATH: process.env.PATH ?? "", HOME: origin, GIT_CONFIG_NOSYSTEM: "1" },
          });
        git("init", "--quiet");
        git("commit", "--quiet", "--allow-empty", "-m", "root");
        const repos = [{ url: `file://${origin}`, workspacePath: "app" }];

        const provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
        const first = await provider.createSandbox({ sessionId: "ses_setup2", repos, envVars: {}, sessionType: "setup" });
        started.push({ sessionId: "ses_setup2", sandboxId: first.sandboxId });
        expect(logOf(first.sandboxId).find((l) => l.step === "clone app")).toMatchObject({ outcome: "ok" });
        const { snapshotId } = await provider.snapshot("ses_setup2", first.sandboxId);
        await provider.terminate("ses_setup2", first.sandboxId);

        const restored = await provider.createSandbox({ sessionId: "ses_coding", repos, envVars: {}, sessionType: "coding", snapshotId });
        started.push({ sessionId: "ses_coding", sandboxId: restored.sandboxId });
        const steps = logOf(restored.sandboxId).filter((l) => l.msg === "boot.step").map((l) => l.step);
        expect(steps).toContain("read snapshot metadata");
        expect(steps).not.toContain("clone app");
        const record = await readSandboxRecord(dataDir, restored.sandboxId);
        if (!record) throw new Error("no registry record");
        expect(existsSync(join(record.workspace, "app/.git"))).toBe(true);
        const metadata = JSON.parse(readFileSync(join(record.home, ".proliferate/metadata.json"), "utf8")) as { sessionId: string; repoDir: string };
        expect(metadata).toMatchObject({ sessionId: "ses_coding", repoDir: join(record.workspace, "app") });

        const tools = (await (await fetch(`${restored.tunnelUrl}/experimental/tool/ids`)).json()) as string[];
        expect(tools).toContain("verify");
        expect(tools).not.toContain("save_service_commands");
        expect(tools).not.toContain("save_env_files");
      } finally {
        await rm(origin, { recursive: true, force: true });
      }
    },
    TIMEOUT,
  );
});
