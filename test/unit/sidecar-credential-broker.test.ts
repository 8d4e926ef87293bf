/**
 * The sidecar's credential broker and control-plane client (issue 23) without sockets: cache
 * until 60 s before expiry on an injected clock, one control-plane call per key at a time, no
 * caching of "none" or of a credential without an expiry; the client's request (route, body,
 * per-call access token) and its failures mapped to 404/503 with messages that name the cause
 * and carry no secret; and the two new env variables.
 */
import { describe, expect, it } from "vitest";
import { verifyAccessToken } from "../../sandbox/shared/access-token";
import { sidecarOptionsFromEnv } from "../../sandbox/sidecar/config";
import { ControlPlaneClient, type GitCredential, type GitCredentialRequest } from "../../sandbox/sidecar/control-plane-client";
import { cacheableUntil, credentialCacheKey, CredentialBroker } from "../../sandbox/sidecar/credential-broker";
import { SidecarError } from "../../sandbox/sidecar/errors";

const REQ: GitCredentialRequest = { protocol: "https", host: "github.com", path: "acme/app.git" };
const T0 = 1_750_000_000_000;

function fakeClient(answers: Array<GitCredential | null>) {
  const asked: GitCredentialRequest[] = [];
  const client = {
    asked,
    gitCredential: async (req: GitCredentialRequest) => {
      asked.push(req);
      return answers.shift() ?? null;
    },
    envValues: async () => ({ A: String(asked.length) }),
  };
  return client;
}

describe("CredentialBroker", () => {
  it("keys the cache by protocol, host and path", () => {
    expect(credentialCacheKey(REQ)).toBe("https://github.com/acme/app.git");
    expect(credentialCacheKey({ protocol: "https", host: "github.com" })).toBe("https://github.com/");
    expect(cacheableUntil({ username: "u", password: "p", expiresAt: T0 })).toBe(T0 - 60_000);
    expect(cacheableUntil({ username: "u", password: "p", expiresAt: null })).toBeNull();
  });

  it("serves from memory until 60 s before expiry, then asks again", async () => {
    let now = T0;
    const client = fakeClient([
      { username: "u", password: "one", expiresAt: T0 + 600_000 },
      { username: "u", password: "two", expiresAt: T0 + 1_200_000 },
    ]);
    const broker = new CredentialBroker(client, () => now);
    expect(await broker.gitCredential(REQ)).toEqual({ credential: expect.objectContaining({ password: "one" }), cached: false });
    now = T0 + 540_000 - 1;
    expect(await broker.gitCredential(REQ)).toEqual({ credential: expect.objectContaining({ password: "one" }), cached: true });
    now = T0 + 540_000;
    expect(await broker.gitCredential(REQ)).toEqual({ credential: expect.objectContaining({ password: "two" }), cached: false });
    expect(client.asked).toHaveLength(2);
  });

  it("does not cache a 404, a credential without expiry, or one already inside the margin", async () => {
    const client = fakeClient([
      null,
      { username: "u", password: "no-expiry", expiresAt: null },
      { username: "u", password: "short", expiresAt: T0 + 30_000 },
      { username: "u", password: "later", expiresAt: T0 + 3_600_000 },
    ]);
    const broker = new CredentialBroker(client, () => T0);
    expect((await broker.gitCredential(REQ)).credential).toBeNull();
    expect((await broker.gitCredential(REQ)).credential?.password).toBe("no-expiry");
    expect((await broker.gitCredential(REQ)).credential?.password).toBe("short");
    expect((await broker.gitCredential(REQ)).credential?.password).toBe("later");
    expect((await broker.gitCredential(REQ)).cached).toBe(true);
    expect(client.asked).toHaveLength(4);
  });

  it("makes one control-plane call for concurrent asks of the same repository", async () => {
    const client = fakeClient([{ username: "u", password: "p", expiresAt: T0 + 3_600_000 }]);
    const broker = new CredentialBroker(client, () => T0);
    const answers = await Promise.all([broker.gitCredential(REQ), broker.gitCredential(REQ), broker.gitCredential(REQ)]);
    expect(answers.map((a) => a.credential?.password)).toEqual(["p", "p", "p"]);
    expect(client.asked).toHaveLength(1);
  });

  it("never caches env values", async () => {
    const client = fakeClient([]);
    const broker = new CredentialBroker(client, () => T0);
    await broker.gitCredential(REQ);
    expect(await broker.envValues()).toEqual({ A: "1" });
    await broker.gitCredential(REQ);
    expect(await broker.envValues()).toEqual({ A: "2" });
  });
});

describe("ControlPlaneClient", () => {
  const KEY = "sandbox-key-0123456789";
  const recorded: { url: string; init: RequestInit }[] = [];
  const respond = (status: number, body?: unknown): typeof fetch =>
    (async (url: string | URL | Request, init?: RequestInit) => {
      recorded.push({ url: String(url), init: init ?? {} });
      return new Response(body === undefined ? null : JSON.stringify(body), { status });
    }) as typeof fetch;
  const client = (fetchImpl: typeof fetch, overrides: Partial<ConstructorParameters<typeof ControlPlaneClient>[0]> = {}) =>
    new ControlPlaneClient({ url: "https://cp.example.com/prod/", sandboxKey: KEY, sessionId: "ses_1", fetch: fetchImpl, now: () => T0, ...overrides });

  async function failure(p: Promise<unknown>): Promise<{ status: number; code: string; message: string }> {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SidecarError);
    const { status, code, message } = err as SidecarError;
    return { status, code, message };
  }

  it("posts the request with a 60 s access token for the session, under the URL's path", async () => {
    recorded.length = 0;
    const credential = await client(respond(200, { credential: { username: "x-access-token", password: "pw", expiresAt: new Date(T0 + 3_600_000).toISOString() } })).gitCredential(REQ);
    expect(credential).toEqual({ username: "x-access-token", password: "pw", expiresAt: T0 + 3_600_000 });
    const [sent] = recorded;
    expect(sent?.url).toBe("https://cp.example.com/prod/v1/sandbox/git-credential");
    expect(sent?.init.method).toBe("POST");
    expect(JSON.parse(String(sent?.init.body))).toEqual(REQ);
    const auth = (sent?.init.headers as Record<string, string>).authorization ?? "";
    const verdict = verifyAccessToken(auth.replace(/^Bearer /, ""), KEY, { sessionId: "ses_1", nowSeconds: T0 / 1000 });
    expect(verdict).toEqual({ ok: true, claims: { sid: "ses_1", iat: T0 / 1000, exp: T0 / 1000 + 60 } });
    expect(sent?.init.signal).toBeInstanceOf(AbortSignal);
  });

  it("reads a credential without a readable expiry as not cacheable", async () => {
    expect(await client(respond(200, { credential: { username: "u", password: "p" } })).gitCredential(REQ)).toEqual({ username: "u", password: "p", expiresAt: null });
    expect(await client(respond(200, { credential: { username: "u", password: "p", expiresAt: "soon" } })).gitCredential(REQ)).toMatchObject({ expiresAt: null });
  });

  it("answers null for a 404 and fetches env values", async () => {
    expect(await client(respond(404, { error: "none" })).gitCredential(REQ)).toBeNull();
    expect(await client(respond(200, { values: { A: "1" } })).envValues()).toEqual({ A: "1" });
  });

  it("maps every failure to a 503 that names the cause and nothing secret", async () => {
    const refused = (async () => {
      throw new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
    }) as typeof fetch;
    const timeout = (async () => {
      throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
    }) as typeof fetch;
    expect(await failure(client(refused).gitCredential(REQ))).toEqual({ status: 503, code: "control_plane_unavailable", message: "the control plane is unreachable (ECONNREFUSED)" });
    expect(await failure(client(timeout).envValues())).toMatchObject({ message: "the control plane is unreachable (timed out)" });
    expect(await failure(client(respond(503, { error: { message: "pw-in-body" } })).gitCredential(REQ))).toMatchObject({
      message: "the control plane answered 503 to /v1/sandbox/git-credential",
    });
    expect(await failure(client(respond(403)).envValues())).toMatchObject({ message: "the control plane refused the sidecar's access token (403)" });
    expect(await failure(client(respond(404)).envValues())).toMatchObject({ message: "the control plane answered 404 to /v1/sandbox/env-values" });
    expect(await failure(client(respond(200, { values: { A: 1 } })).envValues())).toMatchObject({ message: "the control plane's answer to /v1/sandbox/env-values is malformed" });
    expect(await failure(client(respond(200, { credential: { username: "u" } })).gitCredential(REQ))).toMatchObject({ status: 503 });
  });

  it("refuses to call without a URL, a sandbox key or a session id", async () => {
    const never = (async () => {
      throw new Error("must not be called");
    }) as typeof fetch;
    expect(await failure(client(never, { url: undefined }).gitCredential(REQ))).toMatchObject({ status: 503, code: "not_configured", message: expect.stringContaining("CONTROL_PLANE_URL") });
    expect(await failure(client(never, { sandboxKey: undefined }).envValues())).toMatchObject({ code: "not_configured", message: expect.stringContaining("SIDECAR_TOKEN") });
    expect(await failure(client(never, { sessionId: undefined }).envValues())).toMatchObject({ code: "not_configured", message: expect.stringContaining("SESSION_ID") });
  });

  it("logs routes, reasons and status codes only", async () => {
    const lines: string[] = [];
    const log = (message: string, fields?: Record<string, unknown>) => lines.push(JSON.stringify({ message, ...fields }));
    await client(respond(200, { credential: { username: "u", password: "the-password", expiresAt: new Date(T0 + 3_600_000).toISOString() } }), { log }).gitCredential(REQ);
    await client(respond(200, { values: { A: "the-value" } }), { log }).envValues();
    expect(lines).toEqual([
      JSON.stringify({ message: "control plane answered", route: "/v1/sandbox/git-credential", status: 200 }),
      JSON.stringify({ message: "control plane answered", route: "/v1/sandbox/env-values", status: 200 }),
    ]);
  });
});

describe("sidecar configuration for the broker", () => {
  it("reads SIDECAR_SOCKET and CONTROL_PLANE_URL, both optional", () => {
    expect(sidecarOptionsFromEnv({ SIDECAR_SOCKET: "/home/user/.proliferate/sidecar.sock", CONTROL_PLANE_URL: "https://api.example.com/prod" })).toMatchObject({
      socketPath: "/home/user/.proliferate/sidecar.sock",
      controlPlaneUrl: "https://api.example.com/prod",
    });
    const none = sidecarOptionsFromEnv({ SIDECAR_SOCKET: " ", CONTROL_PLANE_URL: "" });
    expect(none.socketPath).toBeUndefined();
    expect(none.controlPlaneUrl).toBeUndefined();
  });

  it.each([
    [{ SIDECAR_SOCKET: "relative/sidecar.sock" }, "SIDECAR_SOCKET"],
    [{ SIDECAR_SOCKET: `/${"x".repeat(107)}` }, "SIDECAR_SOCKET"],
    [{ CONTROL_PLANE_URL: "not a url" }, "CONTROL_PLANE_URL"],
  ])("names the bad variable in %j", (env, name) => {
    expect(() => sidecarOptionsFromEnv(env)).toThrow(name);
  });
});
