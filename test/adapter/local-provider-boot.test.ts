/**
 * The local provider boots through sandbox/boot (the one boot implementation): the sandbox's
 * process-group leader is the boot, its log has every step timed, the session type decides the
 * tools, a restored sandbox reads the snapshot's metadata instead of cloning, and the sidecar
 * (on by default) starts in phase 2 with the sandbox key, which no other process and no log line
 * sees, and dies with the sandbox. Terminate also ends every service the sidecar started (their
 * own process groups), even when the sidecar itself died first. Real processes; every sandbox is
 * terminated in afterAll.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { readSandboxRecord } from "../../functions/providers/local/sandbox-registry";
import { gitOrigin } from "../support/git-origin";
import { agentAuthorization, deriveAgentPassword, deriveSandboxKey, mintAccessToken } from "../../sandbox/shared/access-token";
import { waitFor } from "../support/wait-for";

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
  pid?: number;
}

/** A sandbox key as the control plane derives it (base64url, 43 characters). */
const keyFor = (sessionId: string) => deriveSandboxKey("local-boot-test-master-key-0123456789", sessionId);

function environOf(pid: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
    const i = entry.indexOf("=");
    if (i > 0) env[entry.slice(0, i)] = entry.slice(i + 1);
  }
  return env;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function logOf(sandboxId: string): LogLine[] {
  return readFileSync(join(dataDir, "sandboxes", sandboxId, "sandbox.log"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as LogLine);
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
    "a setup session: the boot leads the group, gets the setup-only tools and the prompt; the sidecar runs with the key only it holds, and dies with the sandbox",
    async () => {
      const key = keyFor("ses_setup");
      const provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
      const sandbox = await provider.createSandbox({ sessionId: "ses_setup", repos: [], envVars: { SIDECAR_TOKEN: key }, sessionType: "setup", systemPrompt: "You set up repos." });
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

      // With a sandbox key, OpenCode answers only to the password derived from it.
      const agentAuth = { authorization: agentAuthorization(deriveAgentPassword(key)) };
      const tools = (await (await fetch(`${sandbox.tunnelUrl}/experimental/tool/ids`, { headers: agentAuth })).json()) as string[];
      expect(tools).toEqual(expect.arrayContaining(["verify", "save_snapshot", "request_env_variables", "save_service_commands", "save_env_files"]));
      const config = JSON.parse(readFileSync(join(record.home, ".config/opencode/opencode.json"), "utf8")) as { instructions: string[] };
      expect(readFileSync(config.instructions[0] ?? "", "utf8")).toBe("You set up repos.");

      // Phase 2 (after create returned): the sidecar answers, with the session's key and with an
      // access token minted from it.
      const sidecarPort = record.sidecarPort;
      expect(sidecarPort).not.toBeNull();
      await waitFor(async () => ((await fetch(`http://127.0.0.1:${sidecarPort}/health`).catch(() => null))?.ok ? true : null), { message: "the sidecar", timeoutMs: 30_000 });
      const services = await fetch(`http://127.0.0.1:${sidecarPort}/services`, { headers: { authorization: `Bearer ${key}` } });
      expect(services.status).toBe(200);
      const now = Math.floor(Date.now() / 1000);
      const access = mintAccessToken(key, { sid: "ses_setup", iat: now, exp: now + 60 });
      expect((await fetch(`http://127.0.0.1:${sidecarPort}/auth/check`, { headers: { authorization: `Bearer ${access}` } })).status).toBe(204);
      const waited = await waitFor(() => logOf(sandbox.sandboxId).find((l) => l.step === "wait for sidecar") ?? null, { message: "the boot's sidecar step", timeoutMs: 30_000 });
      expect(waited).toMatchObject({ phase: 2, outcome: "ok" });

      // The key (issue 14 §2): the sidecar holds it (it answered to it above), but it is in no
      // process's environment (the boot's, the sidecar's, OpenCode's and so the agent's shell),
      // its key file is gone, and no log line shows it.
      const pidOf = (step: string) => lines.concat(logOf(sandbox.sandboxId)).find((l) => l.step === step)?.pid ?? 0;
      for (const pid of [record.pgid, pidOf("start sidecar"), pidOf("start opencode")]) {
        expect(pid).toBeGreaterThan(0);
        const environ = environOf(pid);
        expect(environ).not.toHaveProperty("SIDECAR_TOKEN");
        expect(Object.values(environ).filter((v) => v.includes(key))).toEqual([]);
      }
      expect(environOf(pidOf("start sidecar")).SIDECAR_TOKEN_FILE).toBe("-");
      expect(existsSync(join(record.home, ".proliferate", "sandbox-key"))).toBe(false);
      expect(environOf(pidOf("start opencode")).SESSION_ID).toBe("ses_setup");
      expect(readFileSync(join(dataDir, "sandboxes", sandbox.sandboxId, "sandbox.log"), "utf8")).not.toContain(key);

      await provider.terminate("ses_setup", sandbox.sandboxId);
      expect(groupGone(record.pgid)).toBe(true);
      await expect(fetch(`http://127.0.0.1:${sidecarPort}/health`)).rejects.toThrow();
    },
    TIMEOUT,
  );

  /** A sandbox whose sidecar runs `sleep` as a service (leader + a child); its pids and the sidecar's. */
  async function sandboxWithService(provider: LocalSandboxProvider, sessionId: string, extra: { serviceCommands?: { name: string; command: string }[]; snapshotHasDeps?: boolean } = {}) {
    const key = keyFor(sessionId);
    const sandbox = await provider.createSandbox({ sessionId, repos: [], envVars: { SIDECAR_TOKEN: key }, ...extra });
    started.push({ sessionId, sandboxId: sandbox.sandboxId });
    const record = await readSandboxRecord(dataDir, sandbox.sandboxId);
    if (!record?.sidecarPort) throw new Error("no sidecar port in the record");
    const sidecar = `http://127.0.0.1:${record.sidecarPort}`;
    await waitFor(async () => ((await fetch(`${sidecar}/health`).catch(() => null))?.ok ? true : null), { message: "the sidecar", timeoutMs: 30_000 });
    const res = await fetch(`${sidecar}/services`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "forever", command: "sleep 300 & echo child $!; wait", start: true }),
    });
    expect(res.status).toBe(201);
    const { service } = (await res.json()) as { service: { pid: number; logFile: string } };
    const child = await waitFor(() => {
      const m = /child (\d+)/.exec(existsSync(service.logFile) ? readFileSync(service.logFile, "utf8") : "");
      return m ? Number(m[1]) : null;
    }, { message: "the service's child", timeoutMs: 30_000 });
    expect(alive(service.pid)).toBe(true);
    expect(alive(child)).toBe(true);
    // The service runs repo code: it never sees the key.
    expect(environOf(service.pid)).not.toHaveProperty("SIDECAR_TOKEN");
    const sidecarPid = logOf(sandbox.sandboxId).find((l) => l.step === "start sidecar")?.pid ?? 0;
    return { sandbox, record, leader: service.pid, child, sidecarPid, sidecar, key };
  }

  it(
    "the boot's `services start` reaches the sidecar with an access token; terminate ends every service (their own process groups), idempotently",
    async () => {
      const provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
      const { sandbox, record, leader, child, sidecar, key } = await sandboxWithService(provider, "ses_services", {
        serviceCommands: [{ name: "from-boot", command: "sleep 300" }],
        snapshotHasDeps: true,
      });
      const step = await waitFor(() => logOf(sandbox.sandboxId).find((l) => l.step === "start service commands") ?? null, { message: "the boot's service start", timeoutMs: 30_000 });
      expect(step).toMatchObject({ phase: 2, outcome: "ok" });
      const listed = (await (await fetch(`${sidecar}/services`, { headers: { authorization: `Bearer ${key}` } })).json()) as { services: { name: string; status: string; pid: number }[] };
      const fromBoot = listed.services.find((x) => x.name === "from-boot");
      expect(fromBoot?.status).toBe("running");
      await provider.terminate("ses_services", sandbox.sandboxId);
      expect(alive(fromBoot?.pid ?? 0)).toBe(false);
      expect(groupGone(record.pgid)).toBe(true);
      expect(alive(leader)).toBe(false);
      expect(alive(child)).toBe(false);
      expect(existsSync(join(dataDir, "sandboxes", sandbox.sandboxId))).toBe(false);
      await expect(provider.terminate("ses_services", sandbox.sandboxId)).resolves.toBeUndefined();
    },
    TIMEOUT,
  );

  it(
    "terminate ends the services even when the sidecar died first",
    async () => {
      const provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
      const { sandbox, leader, child, sidecarPid } = await sandboxWithService(provider, "ses_orphans");
      expect(alive(sidecarPid)).toBe(true);
      process.kill(sidecarPid, "SIGKILL");
      await waitFor(() => (alive(sidecarPid) ? null : true), { message: "the sidecar to die", timeoutMs: 30_000 });
      expect(alive(leader)).toBe(true);
      await provider.terminate("ses_orphans", sandbox.sandboxId);
      expect(alive(leader)).toBe(false);
      expect(alive(child)).toBe(false);
    },
    TIMEOUT,
  );

  it(
    "a coding session restored from a snapshot of a setup session: no clone, the snapshot's metadata is read, setup-only tools are gone",
    async () => {
      const origin = gitOrigin("local-boot-origin-").dir;
      try {
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
