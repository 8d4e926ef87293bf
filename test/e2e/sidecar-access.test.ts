/**
 * Sidecar access end to end on the local runtime, with the real local provider, the real boot
 * and the real sidecar in the sandbox: the provision step injects the session's sandbox key
 * (SIDECAR_TOKEN, derived from the runtime's master key), POST /v1/sessions/{id}/sidecar-access
 * mints a short-lived token signed with it, and the sidecar accepts that token on its own. The
 * key itself never appears in an API response; another session's token, an expired token and
 * no token are all refused by the sidecar; a session that is not running gets 409.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionRecord } from "../../functions/domain/session";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let otherOrgToken: string;

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2" } }));
  otherOrgToken = await runtime.addApiToken({ userId: "mallory", orgId: "org-other" });
});

afterAll(async () => {
  await runtime?.close();
});

async function runningSession(title: string): Promise<SessionRecord> {
  const created = await api.request("POST", "/v1/sessions", { body: { title } });
  expect(created.status).toBe(201);
  const id = (created.body as { session: { id: string } }).session.id;
  expect((await api.request("POST", `/v1/sessions/${id}/resume`)).status).toBe(202);
  return waitFor(`session ${id} running`, async () => {
    await runtime.flows.whenIdle();
    const s = await storedSession(runtime, id);
    return s.status === "running" ? s : null;
  });
}

interface SidecarAccess {
  sandboxId: string;
  url: string;
  terminalUrl: string;
  token: string;
  expiresAt: string;
}

/** The sidecar starts in the boot's phase 2, after the session is already running: clients wait for its /health. */
const sidecarUp = (url: string) =>
  waitFor(`the sidecar at ${url}`, async () => {
    try {
      return (await fetch(`${url}/health`)).ok;
    } catch {
      return false;
    }
  }, 30_000);

const sidecarGet = (url: string, token: string | null) => fetch(`${url}/services`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

describe("POST /v1/sessions/{id}/sidecar-access", () => {
  it("mints a token the session's own sidecar accepts; never the sandbox key; other sessions' tokens are refused", async () => {
    const a = await runningSession("sidecar a");
    const b = await runningSession("sidecar b");
    const keyA = await runtime.deps.sandboxKeys.sandboxKey(a.id);
    const keyB = await runtime.deps.sandboxKeys.sandboxKey(b.id);
    expect(keyA).not.toBe(keyB);

    const res = await api.request("POST", `/v1/sessions/${a.id}/sidecar-access`, { body: { ttlSeconds: 120 } });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const access = (res.body as { sidecarAccess: SidecarAccess }).sidecarAccess;
    expect(access.sandboxId).toBe(a.sandboxId);
    expect(access.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(access.terminalUrl).toBe(`${access.url.replace(/^http/, "ws")}/terminal`);
    const expiresIn = Date.parse(access.expiresAt) - Date.now();
    expect(expiresIn).toBeGreaterThan(100_000);
    expect(expiresIn).toBeLessThanOrEqual(120_000);
    // The long-lived key stays between the control plane and the sandbox.
    expect(res.text).not.toContain(keyA);
    expect(JSON.stringify((await api.request("GET", `/v1/sessions/${a.id}`)).body)).not.toContain(keyA);

    // The sidecar in the real sandbox accepts the minted token, and the key it was given at create.
    await sidecarUp(access.url);
    const ok = await sidecarGet(access.url, access.token);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ services: expect.any(Array) });
    expect((await sidecarGet(access.url, keyA)).status).toBe(200);

    // No token, B's key, a token for B, a token signed for A but already expired: all 401.
    const bAccess = ((await api.request("POST", `/v1/sessions/${b.id}/sidecar-access`)).body as { sidecarAccess: SidecarAccess }).sidecarAccess;
    expect(bAccess.url).not.toBe(access.url);
    await sidecarUp(bAccess.url);
    expect((await sidecarGet(bAccess.url, bAccess.token)).status).toBe(200);
    expect((await sidecarGet(access.url, null)).status).toBe(401);
    expect((await sidecarGet(access.url, keyB)).status).toBe(401);
    expect((await sidecarGet(access.url, bAccess.token)).status).toBe(401);
    const nowSeconds = Math.floor(Date.now() / 1000);
    const expired = mintAccessToken(keyA, { sid: a.id, iat: nowSeconds - 120, exp: nowSeconds - 60 });
    expect((await sidecarGet(access.url, expired)).status).toBe(401);
    // A token naming A but signed with B's key (B's holder forging access to A).
    const forged = mintAccessToken(keyB, { sid: a.id, iat: nowSeconds, exp: nowSeconds + 60 });
    expect((await sidecarGet(access.url, forged)).status).toBe(401);

    // Minting access is not activity: it does not move lastActivityAt.
    expect((await storedSession(runtime, a.id)).lastActivityAt).toBe(a.lastActivityAt);
  });

  it("is refused for another org (403), an unknown session (404), a bad ttl (400) and a session that is not running (409)", async () => {
    const created = await api.request("POST", "/v1/sessions", { body: { title: "not running" } });
    const id = (created.body as { session: { id: string } }).session.id;
    const conflict = await api.request("POST", `/v1/sessions/${id}/sidecar-access`);
    expect(conflict.status).toBe(409);
    expect((conflict.body as { error: { message: string } }).error.message).toContain("needs a running sandbox");

    const running = await runningSession("sidecar refusals");
    expect((await api.request("POST", `/v1/sessions/${running.id}/sidecar-access`, { token: otherOrgToken })).status).toBe(403);
    expect((await api.request("POST", "/v1/sessions/ses_00000000000000000000000000/sidecar-access")).status).toBe(404);
    const badTtl = await api.request("POST", `/v1/sessions/${running.id}/sidecar-access`, { body: { ttlSeconds: 86_400 } });
    expect(badTtl.status).toBe(400);
    expect((badTtl.body as { error: { message: string } }).error.message).toContain("ttlSeconds");
    const unknownField = await api.request("POST", `/v1/sessions/${running.id}/sidecar-access`, { body: { token: "mine" } });
    expect(unknownField.status).toBe(400);
  });
});
