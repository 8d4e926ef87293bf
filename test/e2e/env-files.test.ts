/**
 * Env files end to end on the local runtime with the real local provider, the real boot and the
 * real in-sandbox CLI: a session created over HTTP with `envFiles` is provisioned, the provider
 * gets the files in its create call and writes them into the boot request, and the boot's
 * phase 2 (`sandbox env apply`) writes each file into the cloned repository, mode 0600, listed in
 * the repository's `.git/info/exclude` (so `git status` stays clean).
 *
 * Values come from both sources a sandbox has: `SESSION_ID`, which the control plane puts in the
 * sandbox's environment, and `DATABASE_URL`, an org secret the sidecar fetches from the control
 * plane when `env apply` runs (never in the create call, the boot spec or the environment).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CreateSandboxOpts, SandboxProvider } from "../../functions/ports/sandbox-provider";
import { readSandboxRecord } from "../../functions/providers/local/sandbox-registry";
import { gitOrigin } from "../support/git-origin";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

/** An org secret (PUT /v1/secrets/DATABASE_URL before the session boots). */
const SECRET_VALUES = { DATABASE_URL: "postgres://app:pw with space@db:5432/app" };

let runtime: LocalRuntime;
let api: ApiClient;
let origin: string;
const createCalls: CreateSandboxOpts[] = [];

/** Delegates everything to the real local provider; records each create call. */
function recordingProvider(real: SandboxProvider): SandboxProvider {
  return new Proxy(real, {
    get(target, prop) {
      if (prop === "ensureSandbox" || prop === "createSandbox") {
        return (opts: CreateSandboxOpts) => {
          createCalls.push(opts);
          return target[prop](opts);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

beforeAll(async () => {
  origin = gitOrigin("env-files-origin-").dir;
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2" },
    provider: async (type, defaults) => recordingProvider(await defaults(type)),
  }));
});

afterAll(async () => {
  await runtime?.close();
  rmSync(origin, { recursive: true, force: true });
});

const ENV_FILES = [
  { path: "app/.env.local", keys: [{ name: "SESSION_ID" }, { name: "DATABASE_URL" }, { name: "NOT_PROVIDED_ANYWHERE", required: false }] },
  { path: "app/config/secrets.json", format: "json", keys: [{ name: "DATABASE_URL" }] },
];
const NORMALIZED = [
  {
    path: "app/.env.local",
    format: "dotenv",
    keys: [
      { name: "SESSION_ID", required: true },
      { name: "DATABASE_URL", required: true },
      { name: "NOT_PROVIDED_ANYWHERE", required: false },
    ],
  },
  { path: "app/config/secrets.json", format: "json", keys: [{ name: "DATABASE_URL", required: true }] },
];

describe("env files: from POST /v1/sessions to files in the sandbox's workspace", () => {
  it("an invalid envFiles is a 400 naming the field, and no session appears", async () => {
    const before = JSON.stringify((await api.request("GET", "/v1/sessions?limit=100")).body);
    const res = await api.request("POST", "/v1/sessions", { body: { envFiles: [{ path: ".env", keys: [{ name: "TOKEN", value: "s3cr3t" }] }] } });
    expect(res.status).toBe(400);
    const err = (res.body as { error: { code: string; message: string } }).error;
    expect(err.code).toBe("invalid_request");
    expect(err.message).toContain("body.envFiles.0.keys.0.value");
    expect(res.text).not.toContain("s3cr3t");
    expect(JSON.stringify((await api.request("GET", "/v1/sessions?limit=100")).body)).toBe(before);
  });

  it("a session created with envFiles gets them written in its repository and excluded from git", async () => {
    expect((await api.request("PUT", "/v1/secrets/DATABASE_URL", { body: { value: SECRET_VALUES.DATABASE_URL } })).status).toBe(200);
    const created = await api.request("POST", "/v1/sessions", {
      body: { title: "env files", repos: [{ url: `file://${origin}`, workspacePath: "app" }], envFiles: ENV_FILES },
    });
    expect(created.status).toBe(201);
    const session = (created.body as { session: { id: string; envFiles: unknown } }).session;
    expect(session.envFiles).toEqual(NORMALIZED);
    expect(((await api.request("GET", `/v1/sessions/${session.id}`)).body as { session: { envFiles: unknown } }).session.envFiles).toEqual(NORMALIZED);

    expect((await api.request("POST", `/v1/sessions/${session.id}/resume`)).status).toBe(202);
    const running = await waitFor(`session ${session.id} running`, async () => {
      await runtime.flows.whenIdle();
      const s = await storedSession(runtime, session.id);
      return s.status === "running" ? s : null;
    });
    const sandboxId = running.sandboxId ?? "";

    // The provider's create call carried the session's env files (provision step -> CreateSandboxOpts).
    const call = createCalls.find((c) => c.sessionId === session.id);
    expect(call?.envFiles).toEqual(NORMALIZED);
    expect(JSON.stringify(call)).not.toContain(SECRET_VALUES.DATABASE_URL);
    // ... and the boot request the local provider wrote for the boot has them (bootRequest).
    const sandbox = await readSandboxRecord(runtime.sandboxDir, sandboxId);
    if (!sandbox) throw new Error(`no registry record for ${sandboxId}`);
    const bootSpec = JSON.parse(readFileSync(join(runtime.sandboxDir, "sandboxes", sandboxId, "boot-spec.json"), "utf8")) as { request: { envFiles?: unknown } };
    expect(bootSpec.request.envFiles).toEqual(NORMALIZED);
    expect(JSON.stringify(bootSpec)).not.toContain(SECRET_VALUES.DATABASE_URL);

    // Phase 2 runs after the sandbox is up: wait for the boot's env step.
    const repo = join(sandbox.workspace, "app");
    const logPath = join(runtime.sandboxDir, "sandboxes", sandboxId, "sandbox.log");
    const step = await waitFor("the boot's env step", () => {
      const line = readFileSync(logPath, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as { step?: string; outcome?: string; error?: string })
        .find((l) => l.step === "apply env files");
      return line ?? null;
    });
    expect(step, JSON.stringify(step)).toMatchObject({ outcome: "ok" });

    const dotenv = readFileSync(join(repo, ".env.local"), "utf8");
    expect(dotenv).toContain(`SESSION_ID=${session.id}\n`);
    expect(dotenv).toContain(`DATABASE_URL='${SECRET_VALUES.DATABASE_URL}'\n`);
    expect(dotenv).not.toContain("NOT_PROVIDED_ANYWHERE");
    expect(JSON.parse(readFileSync(join(repo, "config/secrets.json"), "utf8"))).toEqual({ DATABASE_URL: SECRET_VALUES.DATABASE_URL });
    expect(statSync(join(repo, ".env.local")).mode & 0o777).toBe(0o600);

    const exclude = readFileSync(join(repo, ".git/info/exclude"), "utf8").split("\n");
    expect(exclude).toEqual(expect.arrayContaining(["/.env.local", "/config/secrets.json"]));
    const status = execFileSync("git", ["-C", repo, "status", "--porcelain", "--untracked-files=all"], { encoding: "utf8", env: { PATH: process.env.PATH ?? "", HOME: repo } });
    expect(status).toBe("");
    expect(existsSync(join(sandbox.workspace, ".env.local"))).toBe(false);

    expect((await api.request("DELETE", `/v1/sessions/${session.id}`)).status).toBe(202);
  });
});
