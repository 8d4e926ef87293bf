/**
 * The sidecar as the sandbox's credential broker (issue 23), over its real Unix socket against
 * a fake control plane on 127.0.0.1: the exact request it sends (route, body, a `sca1` access
 * token for this session that verifies with the sandbox key), credentials cached until 60 s
 * before they expire and then fetched again (injected clock), 404 passed through and not
 * cached, 503 naming the cause, env values fetched every time, the routes absent from the TCP
 * port, a 0600 socket that is replaced when stale and removed on close, and no secret in the
 * sidecar's log lines.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { lstat, rm, writeFile } from "node:fs/promises";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { deriveSandboxKey, verifyAccessToken } from "../../sandbox/shared/access-token";
import type { Sidecar, SidecarOptions } from "../../sandbox/sidecar/server";
import { credentialAnswer, startFakeControlPlane, type FakeControlPlane } from "../support/fake-control-plane";
import { shortSocketPath, socketCall } from "../support/sidecar-socket";
import { call, makeTree, SESSION_ID, startTestSidecar, TOKEN, type TestTree } from "./sidecar-harness";

const PASSWORD = `ghs_${randomBytes(12).toString("hex")}`;
const ROTATED = `ghs_${randomBytes(12).toString("hex")}`;
const SECRET_VALUE = `sk_live_${randomBytes(12).toString("hex")}`;
const HOUR = 3_600_000;

let tree: TestTree;
let cp: FakeControlPlane;
let clock: number;
let logLines: string[];
const sidecars: Sidecar[] = [];

beforeAll(async () => {
  tree = await makeTree();
  cp = await startFakeControlPlane();
});

afterAll(async () => {
  await cp?.close();
  await tree?.cleanup();
});

beforeEach(() => {
  clock = Date.now();
  logLines = [];
  cp.calls.length = 0;
  cp.gitCredential = () => credentialAnswer(PASSWORD, clock + HOUR);
  cp.envValues = () => ({ status: 200, body: { values: { STRIPE_KEY: SECRET_VALUE } } });
});

afterEach(async () => {
  while (sidecars.length > 0) await sidecars.pop()?.close();
});

async function brokerSidecar(overrides: Partial<SidecarOptions> = {}): Promise<Sidecar & { socketPath: string }> {
  const socketPath = shortSocketPath();
  const sidecar = await startTestSidecar(tree, {
    socketPath,
    controlPlaneUrl: cp.url,
    now: () => clock,
    log: (message, fields) => logLines.push(JSON.stringify({ message, ...fields })),
    ...overrides,
  });
  sidecars.push(sidecar);
  return { ...sidecar, socketPath: sidecar.socketPath ?? socketPath };
}

const APP = { protocol: "https", host: "github.com", path: "acme/app.git" };

describe("POST /git/credential on the socket", () => {
  it("asks the control plane with a fresh access token for this session and answers username and password", async () => {
    const sidecar = await brokerSidecar();
    const res = await socketCall(sidecar.socketPath, "POST", "/git/credential", APP);
    expect(res).toEqual({ status: 200, body: { username: "x-access-token", password: PASSWORD } });

    expect(cp.calls).toHaveLength(1);
    const [sent] = cp.calls;
    expect(sent).toMatchObject({ method: "POST", path: "/v1/sandbox/git-credential", contentType: "application/json", body: APP });
    const token = /^Bearer (sca1\.\S+)$/.exec(sent?.authorization ?? "")?.[1] ?? "";
    const verdict = verifyAccessToken(token, TOKEN, { sessionId: SESSION_ID, nowSeconds: Math.floor(clock / 1000) });
    expect(verdict.ok).toBe(true);
    if (verdict.ok) expect(verdict.claims.exp - verdict.claims.iat).toBe(60);
    // A token for another session, or checked with another key, does not verify.
    expect(verifyAccessToken(token, "another-key", { sessionId: SESSION_ID, nowSeconds: Math.floor(clock / 1000) }).ok).toBe(false);
    expect(verifyAccessToken(token, TOKEN, { sessionId: "ses_other", nowSeconds: Math.floor(clock / 1000) }).ok).toBe(false);
  });

  it("leaves path out of the control plane's body when git did not send one", async () => {
    const sidecar = await brokerSidecar();
    await socketCall(sidecar.socketPath, "POST", "/git/credential", { protocol: "https", host: "github.com" });
    expect(cp.calls[0]?.body).toEqual({ protocol: "https", host: "github.com" });
  });

  it("serves a credential from memory until 60 s before it expires, then fetches the rotated one", async () => {
    const expiresAt = clock + HOUR;
    cp.gitCredential = () => credentialAnswer(PASSWORD, expiresAt);
    const sidecar = await brokerSidecar();
    const ask = () => socketCall(sidecar.socketPath, "POST", "/git/credential", APP);

    expect((await ask()).body.password).toBe(PASSWORD);
    clock = expiresAt - 60_000 - 1;
    expect((await ask()).body.password).toBe(PASSWORD);
    expect(cp.calls).toHaveLength(1);

    // Another repository is another cache entry.
    await socketCall(sidecar.socketPath, "POST", "/git/credential", { ...APP, path: "acme/api.git" });
    expect(cp.calls).toHaveLength(2);

    cp.gitCredential = () => credentialAnswer(ROTATED, clock + HOUR);
    clock = expiresAt - 60_000;
    expect((await ask()).body.password).toBe(ROTATED);
    expect(cp.calls).toHaveLength(3);
    expect(cp.calls[2]?.body).toEqual(APP);
  });

  it("passes the control plane's 404 through as no_credential, and does not cache it", async () => {
    cp.gitCredential = () => ({ status: 404, body: { error: { code: "not_found", message: `nothing for ${PASSWORD}` } } });
    const sidecar = await brokerSidecar();
    const res = await socketCall(sidecar.socketPath, "POST", "/git/credential", APP);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: "no_credential", message: "no credential for https://github.com/acme/app.git" } });

    cp.gitCredential = () => credentialAnswer(PASSWORD, clock + HOUR);
    expect(await socketCall(sidecar.socketPath, "POST", "/git/credential", APP)).toMatchObject({ status: 200, body: { password: PASSWORD } });
    expect(cp.calls).toHaveLength(2);
  });

  it("answers 503 naming the cause: control plane down, a 5xx, a refused token, a malformed answer", async () => {
    const down = await startFakeControlPlane();
    const downUrl = down.url;
    await down.close();
    const unreachable = await brokerSidecar({ controlPlaneUrl: downUrl });
    const res = await socketCall(unreachable.socketPath, "POST", "/git/credential", APP);
    expect(res).toMatchObject({ status: 503, body: { error: { code: "control_plane_unavailable", message: "the control plane is unreachable (ECONNREFUSED)" } } });

    const sidecar = await brokerSidecar();
    cp.gitCredential = () => ({ status: 502, body: { error: { message: PASSWORD } } });
    expect(await socketCall(sidecar.socketPath, "POST", "/git/credential", APP)).toMatchObject({
      status: 503,
      body: { error: { message: "the control plane answered 502 to /v1/sandbox/git-credential" } },
    });
    cp.gitCredential = () => ({ status: 401 });
    expect(await socketCall(sidecar.socketPath, "POST", "/git/credential", APP)).toMatchObject({
      status: 503,
      body: { error: { message: "the control plane refused the sidecar's access token (401)" } },
    });
    cp.gitCredential = () => ({ status: 200, body: { credential: { username: "x", secret: PASSWORD } } });
    expect(await socketCall(sidecar.socketPath, "POST", "/git/credential", APP)).toMatchObject({
      status: 503,
      body: { error: { message: "the control plane's answer to /v1/sandbox/git-credential is malformed" } },
    });
    expect(JSON.stringify(logLines)).not.toContain(PASSWORD);
  });

  it("answers 503 not_configured without CONTROL_PLANE_URL, and without a sandbox key", async () => {
    const noUrl = await brokerSidecar({ controlPlaneUrl: undefined });
    expect(await socketCall(noUrl.socketPath, "POST", "/git/credential", APP)).toMatchObject({
      status: 503,
      body: { error: { code: "not_configured", message: expect.stringContaining("CONTROL_PLANE_URL") } },
    });
    expect(await socketCall(noUrl.socketPath, "GET", "/env/values")).toMatchObject({ status: 503, body: { error: { code: "not_configured" } } });
    const noKey = await brokerSidecar({ token: undefined });
    expect(await socketCall(noKey.socketPath, "POST", "/git/credential", APP)).toMatchObject({
      status: 503,
      body: { error: { code: "not_configured", message: expect.stringContaining("SIDECAR_TOKEN") } },
    });
    expect(cp.calls).toHaveLength(0);
  });

  it("refuses a request git could not have sent with 400", async () => {
    const sidecar = await brokerSidecar();
    for (const body of [{ protocol: "ftp", host: "github.com" }, { protocol: "https", host: "git hub" }, { protocol: "https" }, "not json"]) {
      expect((await socketCall(sidecar.socketPath, "POST", "/git/credential", body)).status).toBe(400);
    }
    expect(cp.calls).toHaveLength(0);
  });
});

describe("GET /env/values on the socket", () => {
  it("asks the control plane every time (never cached)", async () => {
    const sidecar = await brokerSidecar();
    expect(await socketCall(sidecar.socketPath, "GET", "/env/values")).toEqual({ status: 200, body: { values: { STRIPE_KEY: SECRET_VALUE } } });
    cp.envValues = () => ({ status: 200, body: { values: { STRIPE_KEY: "rotated" } } });
    expect((await socketCall(sidecar.socketPath, "GET", "/env/values")).body).toEqual({ values: { STRIPE_KEY: "rotated" } });
    expect(cp.calls.map((c) => [c.method, c.path, c.body])).toEqual([
      ["POST", "/v1/sandbox/env-values", {}],
      ["POST", "/v1/sandbox/env-values", {}],
    ]);
    const token = /^Bearer (\S+)$/.exec(cp.calls[0]?.authorization ?? "")?.[1] ?? "";
    expect(verifyAccessToken(token, TOKEN, { sessionId: SESSION_ID, nowSeconds: Math.floor(clock / 1000) }).ok).toBe(true);
  });

  it("answers 503 when the control plane fails", async () => {
    cp.envValues = () => ({ status: 500 });
    const sidecar = await brokerSidecar();
    expect(await socketCall(sidecar.socketPath, "GET", "/env/values")).toMatchObject({
      status: 503,
      body: { error: { code: "control_plane_unavailable", message: "the control plane answered 500 to /v1/sandbox/env-values" } },
    });
  });
});

describe("the socket itself", () => {
  it("serves only the broker's routes, and the TCP port serves none of them", async () => {
    const sidecar = await brokerSidecar();
    expect((await socketCall(sidecar.socketPath, "GET", "/services")).status).toBe(404);
    expect((await socketCall(sidecar.socketPath, "GET", "/health")).status).toBe(404);
    expect((await socketCall(sidecar.socketPath, "GET", "/git/credential")).status).toBe(404);

    expect((await call(sidecar, "POST", "/git/credential", { body: APP })).status).toBe(404);
    expect((await call(sidecar, "GET", "/env/values")).status).toBe(404);
    expect((await call(sidecar, "POST", "/git/credential", { body: APP, token: null })).status).toBe(401);
    expect((await call(sidecar, "GET", "/env/values", { token: null })).status).toBe(401);
    expect(cp.calls).toHaveLength(0);
  });

  it("is a socket with mode 0600, replaced when stale, removed on close", async () => {
    const stale = shortSocketPath();
    // A sidecar killed with SIGKILL leaves its socket file behind.
    const child = spawn(process.execPath, ["-e", `require("net").createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, "SIGKILL"))`]);
    await once(child, "exit");
    expect((await lstat(stale)).isSocket()).toBe(true);

    const sidecar = await brokerSidecar({ socketPath: stale });
    const info = await lstat(stale);
    expect(info.isSocket()).toBe(true);
    expect(info.mode & 0o777).toBe(0o600);
    expect((await socketCall(stale, "POST", "/git/credential", APP)).status).toBe(200);

    sidecars.pop();
    await sidecar.close();
    expect(existsSync(stale)).toBe(false);
  });

  it("refuses to start over a file that is not a socket", async () => {
    const path = shortSocketPath();
    await writeFile(path, "not a socket");
    try {
      await expect(brokerSidecar({ socketPath: path })).rejects.toThrow(`SIDECAR_SOCKET ${path} exists and is not a socket`);
      expect((await lstat(path)).isFile()).toBe(true);
    } finally {
      await rm(path, { force: true });
    }
  });

  it("never logs a password, a value, the sandbox key or an access token", async () => {
    const sidecar = await brokerSidecar();
    await socketCall(sidecar.socketPath, "POST", "/git/credential", APP);
    await socketCall(sidecar.socketPath, "POST", "/git/credential", APP);
    await socketCall(sidecar.socketPath, "GET", "/env/values");
    cp.gitCredential = () => ({ status: 404 });
    await socketCall(sidecar.socketPath, "POST", "/git/credential", { ...APP, path: "acme/other.git" });

    expect(logLines.length).toBeGreaterThanOrEqual(4);
    const logged = logLines.join("\n");
    for (const secret of [PASSWORD, SECRET_VALUE, "STRIPE_KEY", TOKEN, "sca1.", "Bearer"]) expect(logged).not.toContain(secret);
    expect(logged).toContain('"status":200');
    expect(logged).toContain('"host":"github.com"');
  });

  it("redacts what a caller slips into a logged field: the sandbox key, tokens of any shape (issue 14 §6)", async () => {
    const sidecar = await brokerSidecar();
    const glpat = `glpat-${randomBytes(12).toString("hex")}`;
    const rawKey = deriveSandboxKey("a-master-key-for-the-log-redaction-test", SESSION_ID);
    // The agent chooses the host and path git asks about, and the sidecar logs both.
    for (const path of [`acme/${TOKEN}.git`, `acme/${glpat}.git`, `acme/${rawKey}/x.git`, `acme/x.git?sandboxKey=${rawKey}`]) {
      await socketCall(sidecar.socketPath, "POST", "/git/credential", { ...APP, path });
    }
    const logged = logLines.join("\n");
    expect(logged).toContain("acme/");
    for (const secret of [TOKEN, glpat, rawKey]) expect(logged).not.toContain(secret);
    expect(logged).toContain("[REDACTED]");
  });
});
