/**
 * The control plane's routes for the agent's own tools (issue 25 §4) over real HTTP on the local
 * runtime, with no sandbox (the sessions stay `starting` unless a test says otherwise): only a
 * credential signed with the calling session's own sandbox key opens them (401 otherwise);
 * every body is validated like API input (400 naming the field, 413 over the limit) and a
 * refused request changes nothing; the session's state gates them (409 naming it).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05 }));
});
afterAll(async () => {
  await runtime?.close();
});

async function newSession(body: Record<string, unknown> = {}): Promise<string> {
  const res = await api.request("POST", "/v1/sessions", { body });
  expect(res.status, res.text).toBe(201);
  return (res.body as { session: { id: string } }).session.id;
}

async function sandboxToken(sessionId: string, signer = sessionId, ageSeconds = 0): Promise<string> {
  const now = Math.floor(Date.now() / 1000) - ageSeconds;
  return mintAccessToken(await runtime.deps.sandboxKeys.sandboxKey(signer), { sid: sessionId, iat: now, exp: now + 60 });
}

async function call(method: string, path: string, authorization: string | null, body?: unknown): Promise<{ status: number; body: { error?: { code: string; message: string } } & Record<string, unknown> }> {
  const res = await fetch(`${runtime.url}${path}`, {
    method,
    headers: { ...(authorization ? { authorization } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as never) : ({} as never) };
}

const ROUTES: [string, string, unknown][] = [
  ["POST", "/v1/sandbox/snapshots", {}],
  ["GET", "/v1/sandbox/snapshots/snapshot-ses_x-0", undefined],
  ["PUT", "/v1/sandbox/service-commands", { commands: [{ name: "web", command: "npm start" }] }],
  ["PUT", "/v1/sandbox/env-files", { files: [{ path: ".env", keys: [{ name: "A" }] }] }],
  ["POST", "/v1/sandbox/env-requests", { keys: [{ name: "A" }] }],
  ["POST", "/v1/sandbox/verifications", { folder: "evidence", summary: "done", files: [{ path: "a.png", bytes: 3 }], truncated: false, services: [] }],
];

describe("sandbox routes of the agent's tools", () => {
  it("answer 401 to no credential, an API token, another session's key and an expired token", async () => {
    const id = await newSession();
    const other = await newSession();
    const expired = await sandboxToken(id, id, 300);
    for (const [method, path, body] of ROUTES) {
      for (const authorization of [null, `Bearer ${runtime.devApiToken}`, `Bearer ${await sandboxToken(id, other)}`, `Bearer ${expired}`]) {
        const res = await call(method, path, authorization, body);
        expect(res.status, `${method} ${path} with ${authorization?.slice(0, 12) ?? "nothing"}`).toBe(401);
      }
    }
    const session = await storedSession(runtime, id);
    expect(session.serviceCommands).toEqual([]);
    expect(session.envFiles).toEqual([]);
  });

  it("refuse bad input with a 400 naming the field (or 413), and nothing changes", async () => {
    const id = await newSession({ serviceCommands: [{ name: "keep", command: "echo kept" }] });
    const auth = `Bearer ${await sandboxToken(id)}`;
    const cases: [string, string, unknown, string][] = [
      ["PUT", "/v1/sandbox/service-commands", { commands: [] }, "body.commands"],
      ["PUT", "/v1/sandbox/service-commands", { commands: [{ name: "web", command: "x", cwd: "../elsewhere" }] }, "body.commands.0.cwd: must stay inside the workspace"],
      ["PUT", "/v1/sandbox/service-commands", { commands: [{ name: "web", command: "a\u0000b" }] }, "body.commands.0.command"],
      ["PUT", "/v1/sandbox/service-commands", { commands: [{ name: "web", command: "x", shell: "zsh" }] }, 'body.commands.0: unknown field "shell"'],
      ["PUT", "/v1/sandbox/env-files", { files: [{ path: "../.env", keys: [{ name: "A" }] }] }, "body.files.0.path"],
      ["PUT", "/v1/sandbox/env-files", { files: [{ path: ".env", keys: [{ name: "A", value: "s3cr3t" }] }] }, 'body.files.0.keys.0: unknown field "value"'],
      ["PUT", "/v1/sandbox/env-files", { files: [{ path: ".env", keys: [{ name: "A" }] }, { path: "./.env", keys: [{ name: "B" }] }] }, "body.files.1.path"],
      ["POST", "/v1/sandbox/env-requests", { keys: [{ name: "NOT-A-NAME" }] }, "body.keys.0.name: must be an environment variable name"],
      ["POST", "/v1/sandbox/env-requests", { keys: Array.from({ length: 51 }, (_, i) => ({ name: `K${i}` })) }, "body.keys: must list at most 50 keys"],
      ["POST", "/v1/sandbox/env-requests", { keys: [{ name: "A" }], reason: "line\nbreak" }, "body.reason: must be one printable line"],
      ["POST", "/v1/sandbox/snapshots", { message: "x".repeat(501) }, "body.message: must be at most 500 characters"],
      ["GET", "/v1/sandbox/snapshots/pause-ses_x-0", undefined, "execution: must be a snapshot execution name"],
      ["POST", "/v1/sandbox/verifications", { folder: null, summary: null, files: Array.from({ length: 101 }, (_, i) => ({ path: `f${i}`, bytes: 1 })), truncated: true, services: [] }, "body.files: must list at most 100 files"],
      ["POST", "/v1/sandbox/verifications", { folder: null, summary: null, files: [], truncated: false, services: [{ name: "web", status: "sleeping", exitCode: null }] }, "body.services.0.status"],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await call(method, path, auth, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.error?.message).toContain(message);
    }
    expect((await call("PUT", "/v1/sandbox/service-commands", auth, `{"commands":[{"name":"a","command":"${"x".repeat(300_000)}"}]}`)).status).toBe(413);
    const session = await storedSession(runtime, id);
    expect(session.serviceCommands).toEqual([{ name: "keep", command: "echo kept" }]);
    expect(session.envFiles).toEqual([]);
    expect(((await api.request("GET", `/v1/sessions/${id}/events`)).body as { items: unknown[] }).items).toEqual([]);
  });

  it("save the session's service commands and env files (replacing them), log each save, and show them in the session view", async () => {
    const id = await newSession({ serviceCommands: [{ name: "old", command: "echo old" }] });
    const auth = `Bearer ${await sandboxToken(id)}`;
    const commands = [{ name: "web", command: "npm run dev", cwd: "app" }];
    expect(await call("PUT", "/v1/sandbox/service-commands", auth, { commands })).toEqual({ status: 200, body: { serviceCommands: commands, savedTo: ["session"] } });
    const files = [{ path: "app/.env", keys: [{ name: "DATABASE_URL" }, { name: "DEBUG", required: false }] }];
    const saved = await call("PUT", "/v1/sandbox/env-files", auth, { files });
    expect(saved).toEqual({
      status: 200,
      body: { envFiles: [{ path: "app/.env", format: "dotenv", keys: [{ name: "DATABASE_URL", required: true }, { name: "DEBUG", required: false }] }], savedTo: ["session"] },
    });
    const view = ((await api.request("GET", `/v1/sessions/${id}`)).body as { session: Record<string, unknown> }).session;
    expect(view.serviceCommands).toEqual(commands);
    expect(view.envFiles).toEqual(saved.body.envFiles);
    const events = ((await api.request("GET", `/v1/sessions/${id}/events`)).body as { items: { flow: string; actor: string; message: string }[] }).items;
    expect(events.map((e) => [e.flow, e.actor, e.message])).toEqual([
      ["agent:save_service_commands", "agent", "saved service commands: web"],
      ["agent:save_env_files", "agent", "saved env files: app/.env (DATABASE_URL, DEBUG)"],
    ]);
  });

  it("gate on the session's state: a snapshot needs a running session; a stopped session's sandbox can save and ask nothing", async () => {
    const id = await newSession();
    const auth = `Bearer ${await sandboxToken(id)}`;
    expect(await call("POST", "/v1/sandbox/snapshots", auth, {})).toMatchObject({ status: 409, body: { error: { message: "session is starting: cannot save a snapshot" } } });
    // An execution that has not finished (or never ran) is pending.
    expect(await call("GET", `/v1/sandbox/snapshots/snapshot-${id}-0`, auth)).toEqual({
      status: 200,
      body: { snapshot: { execution: `snapshot-${id}-0`, status: "pending", snapshotId: null, message: null } },
    });
    expect((await api.request("DELETE", `/v1/sessions/${id}`)).status).toBe(202);
    await waitFor("stopped", async () => (await storedSession(runtime, id)).status === "stopped");
    for (const [method, path, body] of ROUTES.filter(([m]) => m !== "GET")) {
      const res = await call(method, path, auth, body);
      expect(res.status, `${method} ${path}`).toBe(409);
      expect(res.body.error?.message).toMatch(/^session is stopped: cannot /);
    }
    expect((await storedSession(runtime, id)).serviceCommands).toEqual([]);
  });
});
