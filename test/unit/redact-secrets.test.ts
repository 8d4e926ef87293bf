import { describe, expect, it } from "vitest";
import { redactSecrets, redactValue } from "../../functions/observability/redact-secrets";
import { redactKnown } from "../../sandbox/shared/redact-secrets";
import { agentAuthorization, deriveAgentPassword, deriveSandboxKey, mintAccessToken } from "../../sandbox/shared/access-token";

// Realistic shapes, assembled at runtime so secret scanners do not flag this file.
const j = (...parts: string[]) => parts.join("");
const SECRETS: Record<string, string> = {
  anthropic: j("sk-ant-api03-", "Xy7kQm2pL9vR4tW8zA1bC3dE5fG6hJ0kLmNoPqRsTuVwXyZ-_aBcDeFgHiJkLmNoPqRsTu-Ab12Cd34EfAA"),
  openaiProject: j("sk-proj-", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4"),
  openaiLegacy: j("sk-", "abcdefghij0123456789ABCDEFGHIJ0123456789abcdefgh"),
  modalId: j("ak-", "Jx9QbL2mR7tV4wZ8yA3cE6"),
  modalSecret: j("as-", "Kp4RtY7uI9oP2aS5dF8gH1"),
  e2b: j("e2b_", "3f9a1c7b2d8e4f6a0b5c9d1e7f3a2b8c4d6e0f1a"),
  githubClassic: j("ghp_", "16C7e42F292c6912E7710c838347Ae178B4a"),
  githubFineGrained: j("github_pat_", "11ABCDEFG0abcdefghijkl_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"),
  githubApp: j("ghs_", "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
  slackBot: j("xoxb-", "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
  awsKeyId: j("AKIA", "IOSFODNN7EXAMPLE"),
  jwt: j("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", ".", "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ", ".", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
  platform: j("sbx_", "Qm9vZ2xlLXRva2VuLWJ5dGVzLTEyMzQ1Njc4OTAxMg"),
};

/**
 * Issue 14 §6: a corpus of real token shapes, each in the places it turns up (running text, a
 * header, JSON, env syntax, a URL). Several are exactly what `redactSecrets` missed before.
 */
const MASTER = "a-test-master-key-that-is-long-enough-0123456789";
const sandboxKeys = Array.from({ length: 24 }, (_, i) => deriveSandboxKey(MASTER, `ses_corpus${i}`));
const CORPUS: Record<string, string> = {
  ghp: j("ghp_", "wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx"),
  gho: j("gho_", "16C7e42F292c6912E7710c838347Ae178B4a"),
  ghu: j("ghu_", "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
  ghs: j("ghs_", "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"),
  ghr: j("ghr_", "1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498"),
  githubPat: j("github_pat_", "11AAAAAAA0bbbbbbbbbbbb_cccccccccccccccccccccccccccccccccccccccccccccccccccccccccc1"),
  glpat: j("glpat-", "xR7kZp2mQ9vW4tY8uB3n"),
  glpatRoutable: j("glpat-", "AbCdEfGhIjKlMnOpQrStUvWxYz0.01.0w1abc2de"),
  xoxb: j("xoxb-", "2345678901-2345678901234-aBcDeFgHiJkLmNoPqRsTuVwX"),
  xoxp: j("xoxp-", "2345678901-2345678901-2345678901234-0123456789abcdef0123456789abcdef"),
  xapp: j("xapp-", "1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef0123456789abcdef"),
  akia: j("AKIA", "Z7Q3XWLMN4RTBV2C"),
  asia: j("ASIA", "Y2HGF6DSA8PLKJ4M"),
  anthropic: j("sk-ant-api03-", "q1W2e3R4t5Y6u7I8o9P0a1S2d3F4g5H6j7K8l9Z0x1C2v3B4n5M6q7W8e9R0t1Y2u3I4o5P6a7S8d9F0g-AAAAAA"),
  openai: j("sk-", "T3BlbkFJ0123456789abcdefghijklmnopqrstuvwxyzABCD"),
  openaiProject: j("sk-proj-", "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp-Oo_Nn"),
  jwt: j("eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ", ".", "eyJpc3MiOiJodHRwczovL2V4YW1wbGUuY29tIiwic3ViIjoiYWxpY2UifQ", ".", "c2lnbmF0dXJlLWJ5dGVzLWdvLWhlcmUtMDEyMzQ1Njc4OQ"),
  sbx: j("sbx_", "k3J9mQ2pW7vR4tY8uB1nC5xZ0aS6dF-gH_jKlLqWeRt"),
  sca1: mintAccessToken(sandboxKeys[0] ?? "", { sid: "ses_corpus0", iat: 1_700_000_000, exp: 1_700_000_600 }),
  agentPassword: deriveAgentPassword(sandboxKeys[1] ?? "x"),
  ...Object.fromEntries(sandboxKeys.map((k, i) => [`sandboxKey${i}`, k])),
};

/** Where a secret turns up: every template must lose the secret and keep its surroundings. */
const PLACES: [string, (s: string) => string][] = [
  ["running text", (s) => `sidecar failed with ${s} while starting`],
  ["a quoted JSON value", (s) => `{"note":"${s}","id":"ses_0123456789abcdefghjkmnpqrs"}`],
  ["an unnamed env value", (s) => `VALUE=${s} while starting`],
  ["a Bearer header", (s) => `Authorization: Bearer ${s} while starting`],
];

const NON_SECRETS = [
  "session ses_0123456789abcdefghjkmnpqrs got prompt prm_01jabcdefghjkm0000abcdefgh",
  "ensure-runtime-ses_0123456789abcdefghjkmnpqrs-12 committed at 2026-11-24T20:23:29.123Z",
  "HEAD is 4b825dc642cb6eb9a060e54bf8d69288fbee4904 and e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
  "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matched",
  "The sandbox key is rotated when the session gets a new sandbox; nothing is leaked.",
  "https://alice@github.com/acme/app.git and git@github.com:acme/app.git",
  "GET /v1/sessions?status=running&limit=10 answered 200 in 12ms",
  "handled 4096 tokens across 12 requests for org_acme_corp on 2 cores",
];

describe("redactSecrets on a corpus of real token shapes (issue 14 §6)", () => {
  for (const [kind, secret] of Object.entries(CORPUS)) {
    it.each(PLACES)(`redacts ${kind} in %s`, (_place, wrap) => {
      const out = redactSecrets(wrap(secret));
      expect(out).not.toContain(secret);
      expect(out).toContain("[REDACTED]");
      expect(out).toContain(wrap(secret).includes("while starting") ? "while starting" : "ses_0123456789abcdefghjkmnpqrs");
    });
  }

  it("redacts short token-shaped URL user-info, and passwords in user-info", () => {
    for (const url of [j("https://", "ghs_short", "@github.com/acme/app.git"), j("https://", "glpat-abc", "@gitlab.com/acme/app.git"), j("https://x:", "p4ss", "@h.example/x")]) {
      const out = redactSecrets(`git clone ${url} failed`);
      expect(out).toMatch(/\[REDACTED\]@/);
      expect(out).not.toMatch(/ghs_short|glpat-abc|p4ss/);
    }
  });

  it("redacts AWS secret access keys named as such (env, ini, JSON)", () => {
    const secret = j("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYzEXAMPLEKEY");
    for (const text of [`AWS_SECRET_ACCESS_KEY=${secret}`, `aws_secret_access_key = ${secret}`, `{"SecretAccessKey":"${secret}"}`]) {
      expect(redactSecrets(text)).not.toContain(secret);
    }
  });

  it("redacts Basic headers and PEM private keys of every kind", () => {
    const basic = agentAuthorization(deriveAgentPassword(sandboxKeys[2] ?? "x"));
    expect(redactSecrets(`authorization: ${basic}`)).not.toContain(basic.slice(6));
    for (const kind of ["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]) {
      const pem = `-----BEGIN ${kind}-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nAmT5tY8uB3nC5xZ0aS6d\n-----END ${kind}-----`;
      expect(redactSecrets(`key:\n${pem}\nend`)).toBe("key:\n[REDACTED]\nend");
    }
  });

  it("masks fields named after a sandbox, master, private or signing key", () => {
    const value = { sandboxKey: "plain", sandbox_key: "plain", masterKey: "plain", privateKey: "plain", SIGNING_KEY: "plain", versionKey: "v1-abc" };
    expect(redactValue(value)).toEqual({
      sandboxKey: "[REDACTED]",
      sandbox_key: "[REDACTED]",
      masterKey: "[REDACTED]",
      privateKey: "[REDACTED]",
      SIGNING_KEY: "[REDACTED]",
      versionKey: "v1-abc",
    });
    expect(redactSecrets(`{"sandboxKey":"anything-goes-here"} sandbox_key=abcdefgh`)).not.toMatch(/anything-goes-here|abcdefgh/);
  });

  it.each(NON_SECRETS)("leaves ordinary text alone: %s", (text) => {
    expect(redactSecrets(text)).toBe(text);
  });

  it("redactKnown strips an exact value that has no recognisable shape", () => {
    expect(redactKnown("key is plain-looking-value here", ["plain-looking-value", "", null, "short"])).toBe("key is [REDACTED] here");
  });
});

describe("redactSecrets", () => {
  it.each(Object.entries(SECRETS))("redacts a %s key in running text", (_kind, secret) => {
    const out = redactSecrets(`request failed (key=${secret}) while creating sandbox`.replace("key=", "using "));
    expect(out).not.toContain(secret);
    expect(out).toContain("[REDACTED]");
    expect(out).toContain("while creating sandbox");
  });

  it("redacts Bearer and Basic authorization headers", () => {
    const out = redactSecrets("Authorization: Bearer abc123.def456-ghi789 and Authorization: Basic dXNlcjpwYXNzd29yZA==");
    expect(out).not.toContain("abc123.def456-ghi789");
    expect(out).not.toContain("dXNlcjpwYXNzd29yZA==");
  });

  it("redacts credentials in URLs but keeps the host", () => {
    const out = redactSecrets(`git clone https://x-access-token:${"s3cr3t-v4lue-here"}@github.com/acme/web.git failed; postgres://app:hunter22@db:5432/x`);
    expect(out).not.toContain("s3cr3t-v4lue-here");
    expect(out).not.toContain("hunter22");
    expect(out).toContain("@github.com/acme/web.git");
  });

  it("redacts secret-named keys in JSON and env syntax, including AWS secret access keys", () => {
    const awsSecret = j("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYEXAMPLEKEY");
    const out = redactSecrets(
      `{"apiKey":"abcd-1234-efgh","client_secret": "zzz-yyy-xxx", "password":"hunter2!"} AWS_SECRET_ACCESS_KEY=${awsSecret} X-Api-Key: q1w2e3r4t5`,
    );
    for (const secret of ["abcd-1234-efgh", "zzz-yyy-xxx", "hunter2!", awsSecret, "q1w2e3r4t5"]) expect(out).not.toContain(secret);
  });

  it("redacts PEM private keys", () => {
    const pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
    expect(redactSecrets(`key: ${pem}`)).not.toContain("b3BlbnNzaC1rZXktdjEAAAAA");
  });

  it.each([
    "session ses_0123456789abcdefghjkmnpqrs is running",
    "paused at 2025-06-15T12:34:56.789Z after 300s idle",
    "sandbox 3f2504e0-4f89-11d3-9a0c-0305e82c3301 terminated",
    "The token expired yesterday, so the user must sign in again.",
    "Bearer authentication is required for this endpoint.",
    "max_tokens=4096 and token_count: 1200 were used",
    "ask-the-user-for-confirmation-first and task-0123456789abcdef",
    "https://github.com/acme/web.git on branch main",
    "sandbox sb-AbCdEfGh12345678 and image im-0123456789abcdef",
  ])("leaves ordinary text alone: %s", (text) => {
    expect(redactSecrets(text)).toBe(text);
  });

  it("is idempotent", () => {
    const once = redactSecrets(`key ${SECRETS.anthropic} and token=${SECRETS.githubClassic}`);
    expect(redactSecrets(once)).toBe(once);
  });
});

describe("redactValue", () => {
  it("masks string values under secret-named keys, walks nested objects and errors", () => {
    const value = {
      sessionId: "ses_0123456789abcdefghjkmnpqrs",
      env: { ANTHROPIC_API_KEY: "anything-at-all", GITHUB_TOKEN: "short", PATH: "/usr/bin" },
      maxTokens: 4096,
      note: `leaked ${SECRETS.e2b}`,
      err: new Error(`failed with ${SECRETS.modalSecret}`),
      list: [SECRETS.slackBot],
    };
    expect(redactValue(value)).toEqual({
      sessionId: "ses_0123456789abcdefghjkmnpqrs",
      env: { ANTHROPIC_API_KEY: "[REDACTED]", GITHUB_TOKEN: "[REDACTED]", PATH: "/usr/bin" },
      maxTokens: 4096,
      note: "leaked [REDACTED]",
      err: { name: "Error", message: "failed with [REDACTED]" },
      list: ["[REDACTED]"],
    });
  });
});

describe("WebSocket connect tickets (issue 14 item 5)", () => {
  it("redacts a ticket in a connect URL", () => {
    const ticket = j("wst_", "c2luZ2xlLXVzZS10aWNrZXQtYnl0ZXMtMTIzNDU2Nzg5");
    const out = redactSecrets(`upgrade refused: /ws?sessionId=ses_1&ticket=${ticket}`);
    expect(out).not.toContain(ticket);
    expect(out).toContain("sessionId=ses_1");
  });
});
