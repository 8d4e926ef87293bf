/**
 * What a sandbox needs to do real work (issue 23), end to end on the local runtime with the real
 * local provider, boot, sidecar, CLI, OpenCode and development model:
 * - a private repository served over loopback HTTP with basic auth is cloned with the org secret
 *   the session's repo names, and the agent pushes to it, while the token appears nowhere in the
 *   sandbox: not in any process's environment, `.git/config`, `~/.gitconfig`, the boot spec, the
 *   logs, or the session view;
 * - the agent's commit carries the session user's identity;
 * - an env file gets its value from an org secret;
 * - the session's service command starts;
 * - the model key the org's model names reaches OpenCode: the development model is configured
 *   to refuse any request without that key (DEV_MODEL_REQUIRED_KEY), so the echo only comes back
 *   if OpenCode sent it;
 * - the system prompt is in the agent's instructions.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { readSandboxRecord } from "../../functions/providers/local/sandbox-registry";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import { gitOrigin } from "../support/git-origin";
import { startGitHttpServer, type GitHttpServer } from "../support/git-http-server";
import { apiClient, startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

const GIT_TOKEN = "ghp_e2eGitToken0123456789abcdefABCDEF";
const MODEL_KEY = "sk-dev-e2e-model-key-0123456789";
const DATABASE_URL = "postgres://app:db-secret-pw@db:5432/app";
const SECRET_VALUES = [GIT_TOKEN, MODEL_KEY, DATABASE_URL];

let runtime: LocalRuntime;
let api: ApiClient;
let git: GitHttpServer;
let gitRoot: string;

function hostGit(args: string[], cwd?: string): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: { PATH: process.env.PATH ?? "", HOME: gitRoot, GIT_CONFIG_NOSYSTEM: "1" } });
}

beforeAll(async () => {
  gitRoot = mkdtempSync(join(tmpdir(), "ctx-git-"));
  const origin = gitOrigin("ctx-origin-");
  origin.git("commit", "--quiet", "--allow-empty", "-m", "second");
  hostGit(["clone", "--quiet", "--bare", origin.dir, join(gitRoot, "app.git")]);
  rmSync(origin.dir, { recursive: true, force: true });
  git = await startGitHttpServer({ root: gitRoot, username: "x-access-token", password: GIT_TOKEN });
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2", DEV_MODEL_REQUIRED_KEY: MODEL_KEY },
  }));
});

afterAll(async () => {
  await runtime?.close();
  await git?.close();
  rmSync(gitRoot, { recursive: true, force: true });
});

async function put(path: string, body: unknown): Promise<void> {
  const res = await api.request("PUT", path, { body });
  expect(res.status, res.text).toBe(200);
}

async function transcript(id: string): Promise<string> {
  return JSON.stringify((await api.request("GET", `/v1/sessions/${id}/messages`)).body);
}

/** Sends a prompt and waits until every prompt of the session has completed. */
async function promptAndWait(id: string, content: string): Promise<void> {
  const res = await api.request("POST", `/v1/sessions/${id}/prompts`, { body: { content } });
  expect(res.status, res.text).toBe(202);
  await waitFor(`prompt "${content}" completed`, async () => (await runtime.deps.prompts.list(id)).every((p) => p.status === "completed"));
}

/** Environments of every live process of the session (boot, OpenCode, sidecar, services, tool children). */
function sessionProcessEnvironments(sessionId: string): { pid: string; env: string }[] {
  const out: { pid: string; env: string }[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    let env: string;
    try {
      env = readFileSync(`/proc/${pid}/environ`, "latin1");
    } catch {
      continue; // exited, or not ours
    }
    if (env.split("\0").includes(`SESSION_ID=${sessionId}`)) out.push({ pid, env });
  }
  return out;
}

/** Every regular file under `dir` (logs, specs, state, the workspace), except git's object store. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "objects" && entry.name !== "node_modules") out.push(...filesUnder(path));
    } else if (entry.isFile()) {
      out.push(path);
    }
  }
  return out;
}

describe("sandbox context: secrets, git, model, settings", () => {
  it("a session naming a secret its org does not have is a 400 naming the field; nothing is created", async () => {
    const before = JSON.stringify((await api.request("GET", "/v1/sessions?limit=100")).body);
    const res = await api.request("POST", "/v1/sessions", { body: { repos: [{ url: `${git.url}/app.git`, credential: "NO_SUCH_SECRET" }] } });
    expect(res.status).toBe(400);
    expect((res.body as { error: { message: string } }).error.message).toContain("body.repos.0.credential");
    const ssh = await api.request("POST", "/v1/sessions", { body: { repos: [{ url: "git@github.com:acme/app.git", credential: "NO_SUCH_SECRET" }] } });
    expect((ssh.body as { error: { message: string } }).error.message).toContain("only http(s) repository URLs take a credential");
    expect(JSON.stringify((await api.request("GET", "/v1/sessions?limit=100")).body)).toBe(before);
  });

  it("the org's model names its key secret; members cannot change it", async () => {
    await put("/v1/secrets/GIT_TOKEN", { value: GIT_TOKEN, description: "the private repo" });
    await put("/v1/secrets/DEV_MODEL_KEY", { value: MODEL_KEY });
    await put("/v1/secrets/DATABASE_URL", { value: DATABASE_URL });
    const unknown = await api.request("PUT", "/v1/org/model", { body: { model: { id: "dev/echo", apiKeySecret: "MISSING" } } });
    expect(unknown.status).toBe(400);
    const badProvider = await api.request("PUT", "/v1/org/model", { body: { model: { id: "nowhere/x" } } });
    expect(badProvider.status).toBe(400);
    await put("/v1/org/model", { model: { id: "dev/echo", apiKeySecret: "DEV_MODEL_KEY" } });
    expect((await api.request("GET", "/v1/org/model")).body).toEqual({ model: { id: "dev/echo", apiKeySecret: "DEV_MODEL_KEY" }, fallbackModels: [] });
    const member = apiClient(runtime.url, await runtime.addApiToken({ userId: "bob", orgId: "dev-org" }));
    expect((await member.request("PUT", "/v1/org/model", { body: { model: null } })).status).toBe(403);
    expect((await member.request("GET", "/v1/org/model")).status).toBe(200);
  });

  it("clones the private repo with the org secret, writes env files and instructions, starts services, reaches the model, commits as the user and pushes; no secret leaks", async () => {
    const created = await api.request("POST", "/v1/sessions", {
      body: {
        title: "private repo",
        repos: [{ url: `${git.url}/app.git`, credential: "GIT_TOKEN" }],
        envFiles: [{ path: "app/.env", keys: [{ name: "DATABASE_URL" }] }],
        serviceCommands: [{ name: "marker", command: "echo started > service-started.txt; exec sleep 600" }],
        systemPrompt: "Answer tersely.",
      },
    });
    expect(created.status, created.text).toBe(201);
    const session = (created.body as { session: { id: string; gitIdentity: unknown; repos: unknown } }).session;
    expect(session.gitIdentity).toEqual({ name: "dev-user", email: "dev-user@users.noreply.sandbox.invalid" });
    const id = session.id;

    expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
    const running = await waitFor(`session ${id} running`, async () => {
      await runtime.flows.whenIdle();
      const s = await storedSession(runtime, id);
      if (s.status === "error") throw new Error(`session failed: ${s.errorMessage}`);
      return s.status === "running" ? s : null;
    });
    const record = await readSandboxRecord(runtime.sandboxDir, running.sandboxId ?? "");
    if (!record) throw new Error("no sandbox record");
    const repo = join(record.workspace, "app");

    // The clone: whole history, through the credential helper (git first tries without auth: 401).
    expect(hostGit(["-C", repo, "rev-list", "--count", "HEAD"]).trim()).toBe("2");
    expect(git.requests.some((r) => r.authorized)).toBe(true);
    expect(git.requests.filter((r) => r.authorizationHeaderPresent && !r.authorized)).toEqual([]);

    // Phase 2: env file from the org secret, the service started by the sidecar.
    await waitFor("the env file", () => existsSync(join(repo, ".env")));
    expect(readFileSync(join(repo, ".env"), "utf8")).toContain(`DATABASE_URL=${DATABASE_URL}\n`);
    expect(statSync(join(repo, ".env")).mode & 0o777).toBe(0o600);
    await waitFor("the service's marker file", () => existsSync(join(record.workspace, "service-started.txt")));
    expect(readFileSync(join(record.home, ".config/opencode/instructions.md"), "utf8")).toBe("Answer tersely.");

    // The model key reached OpenCode: the development model answers nobody else.
    await promptAndWait(id, "hello model");
    expect(await transcript(id)).toContain("echo: hello model");

    // The agent commits as the session's user and pushes through the same helper.
    await promptAndWait(id, "$ git -C app commit --quiet --allow-empty -m agent-commit && git -C app push --quiet origin HEAD:refs/heads/agent-work");
    expect(hostGit(["-C", repo, "log", "-1", "--format=%an <%ae> %s"]).trim()).toBe("dev-user <dev-user@users.noreply.sandbox.invalid> agent-commit");
    expect(hostGit(["--git-dir", join(gitRoot, "app.git"), "log", "-1", "--format=%s", "agent-work"]).trim()).toBe("agent-commit");

    // The git token is in no process's environment (the model key is in OpenCode's only, by design).
    const envs = sessionProcessEnvironments(id);
    expect(envs.length).toBeGreaterThanOrEqual(3);
    expect(envs.filter((p) => p.env.includes(GIT_TOKEN) || p.env.includes(DATABASE_URL)).map((p) => p.pid)).toEqual([]);
    // ... in no file of the sandbox but the env file it was asked to write (boot spec, logs, git config, state).
    const sandboxRoot = join(runtime.sandboxDir, "sandboxes", record.sandboxId);
    const leaks = filesUnder(sandboxRoot)
      .filter((f) => f !== join(repo, ".env"))
      .filter((f) => {
        const text = readFileSync(f, "latin1");
        return SECRET_VALUES.some((v) => text.includes(v));
      });
    expect(leaks).toEqual([]);
    expect(readFileSync(join(repo, ".git/config"), "utf8")).not.toContain("x-access-token");
    // ... nor in any response about the session.
    for (const path of [`/v1/sessions/${id}`, `/v1/sessions/${id}/events`, `/v1/sessions/${id}/messages`, "/v1/secrets"]) {
      const text = (await api.request("GET", path)).text;
      expect(SECRET_VALUES.filter((v) => text.includes(v)), path).toEqual([]);
    }

    expect((await api.request("DELETE", `/v1/sessions/${id}`)).status).toBe(202);
  });

  it("the sandbox routes answer only a credential signed with that session's key, and give each session its own repos' credentials only", async () => {
    const created = await api.request("POST", "/v1/sessions", { body: { repos: [{ url: `${git.url}/app.git`, credential: "GIT_TOKEN" }] } });
    const id = (created.body as { session: { id: string } }).session.id;
    const other = (await api.request("POST", "/v1/sessions", { body: {} })).body as { session: { id: string } };
    const nowSeconds = Math.floor(Date.now() / 1000);
    const tokenFor = async (sessionId: string, signer = sessionId) =>
      mintAccessToken(await runtime.deps.sandboxKeys.sandboxKey(signer), { sid: sessionId, iat: nowSeconds, exp: nowSeconds + 60 });
    const ask = async (authorization: string | null, body: unknown = { protocol: "http", host: new URL(git.url).host, path: "app.git" }) => {
      const res = await fetch(`${runtime.url}/v1/sandbox/git-credential`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    };
    // Nobody else: no credential, the API token, another session's key, an expired token.
    expect((await ask(null)).status).toBe(401);
    expect((await ask(`Bearer ${runtime.devApiToken}`)).status).toBe(401);
    expect((await ask(`Bearer ${await tokenFor(id, other.session.id)}`)).status).toBe(401);
    const expired = mintAccessToken(await runtime.deps.sandboxKeys.sandboxKey(id), { sid: id, iat: nowSeconds - 120, exp: nowSeconds - 60 });
    expect((await ask(`Bearer ${expired}`)).status).toBe(401);
    // The session's own sidecar: its repo's credential, and only for its repo.
    const ok = await ask(`Bearer ${await tokenFor(id)}`);
    expect(ok.status, ok.text).toBe(200);
    expect((JSON.parse(ok.text) as { credential: { username: string; password: string } }).credential).toMatchObject({ username: "x-access-token", password: GIT_TOKEN });
    expect((await ask(`Bearer ${await tokenFor(id)}`, { protocol: "http", host: new URL(git.url).host, path: "elsewhere.git" })).status).toBe(404);
    expect((await ask(`Bearer ${await tokenFor(other.session.id)}`)).status).toBe(404);
    // A stopped session's sandbox gets nothing.
    await api.request("DELETE", `/v1/sessions/${other.session.id}`);
    await waitFor("the other session stopped", async () => (await storedSession(runtime, other.session.id)).status === "stopped");
    expect((await ask(`Bearer ${await tokenFor(other.session.id)}`)).status).toBe(409);
  });

  it("after a key rotation, a credential signed with an earlier epoch's key is refused; the current and next epochs' are accepted (issue 14 §2)", async () => {
    const created = await api.request("POST", "/v1/sessions", { body: {} });
    const id = (created.body as { session: { id: string } }).session.id;
    const keys = runtime.deps.sandboxKeys;
    // What provisioning two fresh sandboxes leaves behind: the session at key epoch 2.
    const session = await storedSession(runtime, id);
    await runtime.deps.sessions.update(session, { sandboxKeyEpoch: 2 }, new Date());
    const nowSeconds = Math.floor(Date.now() / 1000);
    const signedAt = async (epoch: number) => mintAccessToken(await keys.sandboxKey(id, epoch), { sid: id, iat: nowSeconds, exp: nowSeconds + 60 });
    const ask = async (epoch: number) =>
      (
        await fetch(`${runtime.url}/v1/sandbox/env-values`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${await signedAt(epoch)}` },
          body: "{}",
        })
      ).status;
    // The v1 key and epoch 1's belong to sandboxes this session has replaced.
    expect(await ask(0)).toBe(401);
    expect(await ask(1)).toBe(401);
    // The current sandbox's key, and the next one's (a sandbox being provisioned asks before its commit).
    expect(await ask(2)).toBe(200);
    expect(await ask(3)).toBe(200);
    expect(await ask(4)).toBe(401);
    expect(await keys.sandboxKey(id)).toBe(await keys.sandboxKey(id, 2));
    // The epoch is internal: the session view never shows it.
    expect(JSON.stringify((await api.request("GET", `/v1/sessions/${id}`)).body)).not.toContain("sandboxKeyEpoch");
    await api.request("DELETE", `/v1/sessions/${id}`);
  });
});
