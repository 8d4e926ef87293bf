/**
 * Bearer parsing, the constant-time token check, and access tokens: secure by default when no
 * token is set; an access token opens the sidecar only when signed with this sandbox's key, for
 * this session, unexpired; without a session id only the plain key works.
 */
import { describe, expect, it } from "vitest";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import { authenticate, authorized, bearerCredential, tokenMatches } from "../../sandbox/sidecar/auth";

describe("bearerCredential", () => {
  it("takes the credential of a Bearer header, case-insensitively on the scheme", () => {
    expect(bearerCredential("Bearer abc")).toBe("abc");
    expect(bearerCredential("bearer abc")).toBe("abc");
    expect(bearerCredential("Bearer   abc  ")).toBe("abc");
  });

  it.each([undefined, "", "Bearer", "Bearer ", "Basic abc", "abc", "Bearer a b", ["Bearer abc"]])("finds none in %j", (header) => {
    expect(bearerCredential(header)).toBeNull();
  });
});

describe("tokenMatches", () => {
  it("accepts only the exact token", () => {
    expect(tokenMatches("s3cret-token", "s3cret-token")).toBe(true);
    expect(tokenMatches("s3cret-tokeN", "s3cret-token")).toBe(false);
    expect(tokenMatches("s3cret-token-longer", "s3cret-token")).toBe(false);
    expect(tokenMatches("s3cret", "s3cret-token")).toBe(false);
  });

  it("refuses everything when no token is configured", () => {
    for (const presented of ["", "anything", "undefined", null]) {
      expect(tokenMatches(presented, undefined)).toBe(false);
      expect(tokenMatches(presented, "")).toBe(false);
    }
  });

  it("authorized combines both", () => {
    expect(authorized("Bearer t0ken", { token: "t0ken" })).toBe(true);
    expect(authorized("Bearer t0ken", { token: undefined })).toBe(false);
    expect(authorized(undefined, { token: "t0ken" })).toBe(false);
  });
});

describe("authenticate with access tokens", () => {
  const KEY = "sandbox-key-for-ses_a-0123456789abcdef";
  const NOW_S = 1_700_000_000;
  const config = { token: KEY, sessionId: "ses_a", now: () => NOW_S * 1000 };
  const mint = (over: Partial<{ sid: string; iat: number; exp: number }> = {}, key = KEY) =>
    mintAccessToken(key, { sid: "ses_a", iat: NOW_S - 10, exp: NOW_S + 300, ...over });
  const bearer = (t: string) => `Bearer ${t}`;

  it("the plain sandbox key is the control plane", () => {
    expect(authenticate(bearer(KEY), config)).toEqual({ kind: "sandbox-key", credential: KEY });
  });

  it("accepts a valid access token for this session and says until when", () => {
    const token = mint();
    expect(authenticate(bearer(token), config)).toEqual({ kind: "access-token", credential: token, expiresAt: NOW_S + 300 });
  });

  it.each([
    ["expired", () => mint({ exp: NOW_S - 1 })],
    ["expiring this very second", () => mint({ exp: NOW_S })],
    ["for another session", () => mint({ sid: "ses_b" })],
    ["signed with another key", () => mint({}, "another-sandbox-key-0123456789abcdef")],
    ["with a tampered signature", () => {
      const [p, payload, sig = ""] = mint().split(".");
      return `${p}.${payload}.${sig.startsWith("A") ? "B" : "A"}${sig.slice(1)}`;
    }],
    ["with a tampered payload", () => {
      const [p, , sig] = mint().split(".");
      const payload = Buffer.from(JSON.stringify({ sid: "ses_a", iat: NOW_S, exp: NOW_S + 999_999 })).toString("base64url");
      return `${p}.${payload}.${sig}`;
    }],
    ["living longer than the cap", () => mint({ iat: NOW_S, exp: NOW_S + 24 * 3600 + 1 })],
    ["malformed (two parts)", () => mint().split(".").slice(0, 2).join(".")],
    ["malformed (not base64 JSON)", () => "sca1.bm90IGpzb24.c2ln"],
    ["with the right shape but no signature", () => `${mint().split(".").slice(0, 2).join(".")}.`],
  ])("refuses an access token %s", (_what, make) => {
    expect(authenticate(bearer(make()), config)).toBeNull();
  });

  it("refuses access tokens without a session id, the key still works", () => {
    const noSession = { token: KEY, sessionId: undefined, now: config.now };
    expect(authenticate(bearer(mint()), noSession)).toBeNull();
    expect(authenticate(bearer(KEY), noSession)?.kind).toBe("sandbox-key");
  });

  it("refuses everything, access tokens included, when no key is configured", () => {
    for (const token of [undefined, ""]) {
      expect(authenticate(bearer(mint()), { ...config, token })).toBeNull();
      expect(authenticate(bearer(mintAccessToken("", { sid: "ses_a", iat: NOW_S, exp: NOW_S + 60 })), { ...config, token })).toBeNull();
    }
  });
});
