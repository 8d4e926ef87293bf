/**
 * sandbox/shared/access-token.ts on its own: the sandbox key is derived per session and per
 * master key (and refuses a short master key); an access token round-trips, and every rejection
 * reason (malformed, signature, session, lifetime, expired) is reachable and reported as such.
 */
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  ACCESS_TOKEN_PREFIX,
  agentAuthorization,
  deriveAgentPassword,
  deriveSandboxKey,
  looksLikeAccessToken,
  MAX_ACCESS_TOKEN_LIFETIME_SECONDS,
  mintAccessToken,
  verifyAccessToken,
} from "../../sandbox/shared/access-token";

const MASTER = "m".repeat(32);
const OTHER_MASTER = "n".repeat(32);
const NOW = 1_700_000_000;
const KEY = deriveSandboxKey(MASTER, "ses_1");
const expected = { sessionId: "ses_1", nowSeconds: NOW };
const mint = (over: Partial<{ sid: string; iat: number; exp: number }> = {}, key = KEY) => mintAccessToken(key, { sid: "ses_1", iat: NOW, exp: NOW + 600, ...over });
const b64 = (value: unknown) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");

describe("deriveSandboxKey", () => {
  it("is deterministic, differs per session and per master key, and is base64url", () => {
    expect(deriveSandboxKey(MASTER, "ses_1")).toBe(KEY);
    expect(deriveSandboxKey(MASTER, "ses_2")).not.toBe(KEY);
    expect(deriveSandboxKey(OTHER_MASTER, "ses_1")).not.toBe(KEY);
    expect(KEY).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(KEY).not.toContain(MASTER);
  });

  it("throws on a master key shorter than 32 characters", () => {
    expect(() => deriveSandboxKey("m".repeat(31), "ses_1")).toThrow(/at least 32/);
    expect(() => deriveSandboxKey("", "ses_1")).toThrow(/at least 32/);
  });

  it("per key epoch (issue 14 §2): epoch 0 is the v1 key sessions stored before epochs have; every other epoch has its own", () => {
    const v1 = createHmac("sha256", MASTER).update("sandbox-key/v1/ses_1", "utf8").digest("base64url");
    expect(deriveSandboxKey(MASTER, "ses_1", 0)).toBe(v1);
    expect(KEY).toBe(v1);
    const epochs = [1, 2, 3, 10].map((e) => deriveSandboxKey(MASTER, "ses_1", e));
    expect(epochs[0]).toBe(createHmac("sha256", MASTER).update("sandbox-key/v2/ses_1/1", "utf8").digest("base64url"));
    expect(new Set([v1, ...epochs]).size).toBe(5);
    // No collision across sessions and epochs ("ses_1" epoch 11 vs "ses_11" epoch 1).
    expect(deriveSandboxKey(MASTER, "ses_1", 11)).not.toBe(deriveSandboxKey(MASTER, "ses_11", 1));
    for (const bad of [-1, 1.5, Number.NaN]) expect(() => deriveSandboxKey(MASTER, "ses_1", bad)).toThrow(/epoch/);
  });
});

describe("mint and verify", () => {
  it("round-trips the claims", () => {
    const token = mint();
    expect(looksLikeAccessToken(token)).toBe(true);
    expect(token.startsWith(`${ACCESS_TOKEN_PREFIX}.`)).toBe(true);
    expect(token.split(".")).toHaveLength(3);
    expect(verifyAccessToken(token, KEY, expected)).toEqual({ ok: true, claims: { sid: "ses_1", iat: NOW, exp: NOW + 600 } });
  });

  it("does not take a plain key for an access token", () => {
    expect(looksLikeAccessToken(KEY)).toBe(false);
    expect(verifyAccessToken(KEY, KEY, expected)).toEqual({ ok: false, reason: "malformed" });
  });

  it.each([
    ["", "malformed"],
    ["sca1", "malformed"],
    ["sca1..", "malformed"],
    ["sca2.a.b", "malformed"],
    ["sca1.a.b.c", "malformed"],
  ])("refuses %j as %s", (token, reason) => {
    expect(verifyAccessToken(token, KEY, expected)).toEqual({ ok: false, reason });
  });

  it("a correctly signed payload that is not claims JSON is malformed; the same payload unsigned is a signature failure", () => {
    // The token construction, written out: HMAC-SHA256(key, "sca1.<payload>"), base64url.
    const signWith = (key: string, payload: string) => `sca1.${payload}.${createHmac("sha256", key).update(`sca1.${payload}`).digest("base64url")}`;
    expect(signWith(KEY, b64({ sid: "ses_1", iat: NOW, exp: NOW + 600 }))).toBe(mint());
    for (const payload of [b64("not json"), b64({ sid: "ses_1" }), b64(null), b64([1, 2]), "%%%"]) {
      expect(verifyAccessToken(signWith(KEY, payload), KEY, expected), payload).toEqual({ ok: false, reason: "malformed" });
      expect(verifyAccessToken(signWith("another-key", payload), KEY, expected), payload).toEqual({ ok: false, reason: "signature" });
    }
  });

  it("reports a tampered signature, payload or another key as a signature failure", () => {
    const [prefix, payload, sig = ""] = mint().split(".");
    // The first character: all six bits are signature (the last one carries two ignored padding bits).
    const flipped = `${sig.startsWith("A") ? "B" : "A"}${sig.slice(1)}`;
    expect(verifyAccessToken(`${prefix}.${payload}.${flipped}`, KEY, expected)).toEqual({ ok: false, reason: "signature" });
    expect(verifyAccessToken(`${prefix}.${payload}.${sig.slice(0, 10)}`, KEY, expected)).toEqual({ ok: false, reason: "signature" });
    const longer = b64({ sid: "ses_1", iat: NOW, exp: NOW + 999_999 });
    expect(verifyAccessToken(`${prefix}.${longer}.${sig}`, KEY, expected)).toEqual({ ok: false, reason: "signature" });
    expect(verifyAccessToken(mint({}, deriveSandboxKey(OTHER_MASTER, "ses_1")), KEY, expected)).toEqual({ ok: false, reason: "signature" });
    // A token of session 2, signed with session 2's key, presented to session 1's sandbox.
    expect(verifyAccessToken(mint({ sid: "ses_2" }, deriveSandboxKey(MASTER, "ses_2")), KEY, expected)).toEqual({ ok: false, reason: "signature" });
  });

  it("refuses well-signed claims that are not claims", () => {
    // Signed with the right key through the same construction mint uses, but with bad claims.
    for (const claims of [{ sid: "", iat: NOW, exp: NOW + 1 }, { sid: "ses_1", iat: NOW + 0.5, exp: NOW + 1 }]) {
      expect(verifyAccessToken(mintAccessToken(KEY, claims), KEY, expected)).toEqual({ ok: false, reason: "malformed" });
    }
  });

  it("refuses a token for another session signed with this key", () => {
    expect(verifyAccessToken(mint({ sid: "ses_2" }), KEY, expected)).toEqual({ ok: false, reason: "session" });
  });

  it("refuses an expired token: exp is exclusive", () => {
    expect(verifyAccessToken(mint({ iat: NOW - 600, exp: NOW - 1 }), KEY, expected)).toEqual({ ok: false, reason: "expired" });
    expect(verifyAccessToken(mint({ iat: NOW - 600, exp: NOW }), KEY, expected)).toEqual({ ok: false, reason: "expired" });
    expect(verifyAccessToken(mint({ iat: NOW - 600, exp: NOW + 1 }), KEY, expected).ok).toBe(true);
  });

  it("caps the lifetime whatever the claims say", () => {
    expect(verifyAccessToken(mint({ exp: NOW + MAX_ACCESS_TOKEN_LIFETIME_SECONDS }), KEY, expected).ok).toBe(true);
    expect(verifyAccessToken(mint({ exp: NOW + MAX_ACCESS_TOKEN_LIFETIME_SECONDS + 1 }), KEY, expected)).toEqual({ ok: false, reason: "lifetime" });
  });
});

describe("deriveAgentPassword / agentAuthorization (OpenCode's server password)", () => {
  it("is base64url(HMAC-SHA256(sandbox key, \"opencode-password/v1\")): deterministic, per session, never the key itself", () => {
    const password = deriveAgentPassword(KEY);
    expect(password).toBe(createHmac("sha256", KEY).update("opencode-password/v1").digest("base64url"));
    expect(password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(deriveAgentPassword(KEY)).toBe(password);
    expect(deriveAgentPassword(deriveSandboxKey(MASTER, "ses_2"))).not.toBe(password);
    expect(password).not.toBe(KEY);
    // Not an access token, and no access token verifies against it.
    expect(looksLikeAccessToken(password)).toBe(false);
    expect(verifyAccessToken(mint(), password, expected)).toEqual({ ok: false, reason: "signature" });
    expect(() => deriveAgentPassword("")).toThrow(/empty/);
  });

  it("is HTTP basic auth for OpenCode's default user name", () => {
    const header = agentAuthorization("pw-123");
    expect(header).toBe(`Basic ${Buffer.from("opencode:pw-123").toString("base64")}`);
    expect(Buffer.from(header.slice("Basic ".length), "base64").toString()).toBe("opencode:pw-123");
  });
});
