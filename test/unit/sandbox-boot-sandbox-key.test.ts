/**
 * The sandbox key stays with the sidecar: the boot holds it (taken from its key file, issue 14
 * §2), a spawned non-sidecar process (OpenCode, Caddy) and a run step (git, the CLI, scripts)
 * never see it; the sidecar gets it on its stdin, never in its environment; a CLI step that calls
 * the sidecar gets a short-lived access token for this session instead; a `SIDECAR_TOKEN` left
 * in the boot's environment reaches no child. Real child processes (`env`), a real process table.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BootStep, ProcessId } from "../../sandbox/boot/boot-plan";
import { ProcessTable } from "../../sandbox/boot/processes";
import { confineSandboxKey, createStepExecutor } from "../../sandbox/boot/step-executor";
import { verifyAccessToken } from "../../sandbox/shared/access-token";

const KEY = "the-sandbox-key-0123456789abcdefghijklmnop";
const NOW_MS = 1_700_000_000_000;
let dir: string;
let processes: ProcessTable;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "boot-key-"));
  processes = new ProcessTable();
});

afterAll(async () => {
  await processes.stopAll(1_000);
  await rm(dir, { recursive: true, force: true });
});

const STRAY = "a-stray-env-token-0123456789abcdef";
const bootEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, SESSION_ID: "ses_key", SIDECAR_TOKEN: STRAY, KEEP_ME: "yes" });

function executor(env = bootEnv(), sandboxKey: string | null = KEY) {
  return createStepExecutor({ env, sandboxKey: sandboxKey ?? undefined, processes, sleep: async () => undefined, fetch: async () => ({ ok: true }), now: () => NOW_MS });
}

/** Spawns `env` as the given boot process and returns the variables it saw. */
async function spawnedEnv(process: ProcessId, stepEnv: Record<string, string> = {}, env = bootEnv()): Promise<Record<string, string>> {
  const log = join(dir, `${process}.log`);
  // `env` first; then whatever arrived on stdin, as one more "STDIN=" line.
  const argv = ["sh", "-c", `env; printf 'STDIN=%s\\n' "$(cat 2>/dev/null)"`];
  const step: BootStep = { kind: "spawn", name: `start ${process}`, process, command: { argv }, cwd: dir, env: stepEnv, log };
  expect(await executor(env)(step)).toMatchObject({ status: "ok" });
  await processes.waitExit(process);
  return parseEnv(await readFile(log, "utf8"));
}

async function ranEnv(extra: Partial<Extract<BootStep, { kind: "run" }>> = {}): Promise<Record<string, string>> {
  const out = join(dir, `run-${Math.random().toString(36).slice(2)}.env`);
  const step: BootStep = { kind: "run", name: "run env", command: { argv: ["sh", "-c", `env > ${out}`] }, cwd: dir, env: {}, timeoutMs: 10_000, ...extra };
  expect(await executor()(step)).toEqual({ status: "ok" });
  return parseEnv(await readFile(out, "utf8"));
}

function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) env[line.slice(0, i)] = line.slice(i + 1);
  }
  return env;
}

describe("the sandbox key reaches only the sidecar", () => {
  it("a spawned non-sidecar process (OpenCode) does not get SIDECAR_TOKEN, even if its step env names it", async () => {
    const env = await spawnedEnv("opencode", { SIDECAR_TOKEN: "from-the-step" });
    expect(env.KEEP_ME).toBe("yes");
    expect(env.SESSION_ID).toBe("ses_key");
    expect(env).not.toHaveProperty("SIDECAR_TOKEN");
    expect(Object.values(env)).not.toContain(KEY);
    expect(env.STDIN).toBe("");
  });

  it("Caddy does not get it either", async () => {
    expect(await spawnedEnv("caddy")).not.toHaveProperty("SIDECAR_TOKEN");
  });

  it("the sidecar spawn does, on its stdin and not in its environment, with the session id beside it", async () => {
    const env = await spawnedEnv("sidecar", { SIDECAR_PORT: "4000", SIDECAR_TOKEN_FILE: "-" });
    expect(env.STDIN).toBe(KEY);
    expect(env).not.toHaveProperty("SIDECAR_TOKEN");
    expect(Object.entries(env).filter(([name, value]) => name !== "STDIN" && value.includes(KEY))).toEqual([]);
    expect(env.SESSION_ID).toBe("ses_key");
    expect(env.SIDECAR_PORT).toBe("4000");
  });

  it("a SIDECAR_TOKEN in the boot's environment is nobody's key: not the sidecar's, not a child's", async () => {
    const keyless = executor(bootEnv(), null);
    const log = join(dir, "keyless-sidecar.log");
    const argv = ["sh", "-c", `env; printf 'STDIN=%s\\n' "$(cat)"`];
    await keyless({ kind: "spawn", name: "start sidecar", process: "sidecar", command: { argv }, cwd: dir, env: {}, log });
    await processes.waitExit("sidecar");
    const env = parseEnv(await readFile(log, "utf8"));
    expect(env.STDIN).toBe("");
    expect(JSON.stringify(env)).not.toContain(STRAY);
  });

  it("a run step (scripts, git, the CLI) does not get it", async () => {
    const env = await ranEnv();
    expect(env.KEEP_ME).toBe("yes");
    expect(env).not.toHaveProperty("SIDECAR_TOKEN");
  });

  it("a CLI step that calls the sidecar gets an access token for this session, valid for its timeout, not the key", async () => {
    const env = await ranEnv({ sidecarAccess: true, timeoutMs: 120_000 });
    const token = env.SIDECAR_TOKEN ?? "";
    expect(token).not.toBe(KEY);
    const nowSeconds = NOW_MS / 1000;
    const verdict = verifyAccessToken(token, KEY, { sessionId: "ses_key", nowSeconds });
    expect(verdict).toEqual({ ok: true, claims: { sid: "ses_key", iat: nowSeconds, exp: nowSeconds + 120 + 60 } });
    expect(verifyAccessToken(token, KEY, { sessionId: "ses_key", nowSeconds: nowSeconds + 181 })).toEqual({ ok: false, reason: "expired" });
  });

  it("without a key or a session id there is nothing to mint: the CLI step gets no token", async () => {
    const noSession = { ...bootEnv(), SESSION_ID: undefined };
    const out = join(dir, "nosession.env");
    const step: BootStep = { kind: "run", name: "cli", command: { argv: ["sh", "-c", `env > ${out}`] }, cwd: dir, env: {}, timeoutMs: 10_000, sidecarAccess: true };
    await executor(noSession)(step);
    expect(parseEnv(await readFile(out, "utf8"))).not.toHaveProperty("SIDECAR_TOKEN");
  });

  it("confineSandboxKey splits the key from what children inherit; an empty key is none", () => {
    expect(confineSandboxKey({ A: "1", SIDECAR_TOKEN: KEY })).toEqual({ inherited: { A: "1" }, sandboxKey: KEY });
    expect(confineSandboxKey({ A: "1", SIDECAR_TOKEN: "" })).toEqual({ inherited: { A: "1" }, sandboxKey: undefined });
    expect(confineSandboxKey({ A: "1" })).toEqual({ inherited: { A: "1" }, sandboxKey: undefined });
  });
});
