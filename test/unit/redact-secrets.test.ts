import { describe, expect, it } from "vitest";
import { redactSecrets, redactValue } from "../../functions/observability/redact-secrets";

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
