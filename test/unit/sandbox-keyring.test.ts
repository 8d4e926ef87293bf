/**
 * The control plane's sandbox keyring (functions/config/sandbox-keyring.ts) at the Secrets
 * Manager SDK surface: the master key is read once per container from the secret, a failed read
 * is retried by the next call, a short secret is refused without its value in the error, and the
 * derived keys are what the sidecar expects (sandbox/shared/access-token.ts).
 */
import { inspect } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { mockClient } from "aws-sdk-client-mock";
import { GetSecretValueCommand, InternalServiceError, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { keyringFromEnv, staticKeyring } from "../../functions/config/sandbox-keyring";
import { deriveSandboxKey } from "../../sandbox/shared/access-token";

const secrets = mockClient(SecretsManagerClient);
const ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sandbox-access-key-AbCdEf";
const MASTER = ["master", "Kp4RtY7uI9oP2aS5dF8gH1jK3lZ6xC9v"].join("-");
const client = () => new SecretsManagerClient({ region: "eu-west-1" });

afterEach(() => secrets.reset());

describe("sandbox keyring", () => {
  it("derives each session's key from SANDBOX_ACCESS_KEY without calling Secrets Manager", async () => {
    const keys = keyringFromEnv({ SANDBOX_ACCESS_KEY: MASTER }, client);
    expect(await keys.sandboxKey("ses_a")).toBe(deriveSandboxKey(MASTER, "ses_a"));
    expect(await keys.sandboxKey("ses_b")).not.toBe(await keys.sandboxKey("ses_a"));
    expect(secrets.calls()).toHaveLength(0);
  });

  it("reads the secret once, on first use, and derives from it", async () => {
    secrets.on(GetSecretValueCommand, { SecretId: ARN }).resolves({ SecretString: MASTER });
    const keys = keyringFromEnv({ SANDBOX_ACCESS_KEY_SECRET_ARN: ARN }, client);
    expect(secrets.calls()).toHaveLength(0);
    expect(await keys.sandboxKey("ses_a")).toBe(deriveSandboxKey(MASTER, "ses_a"));
    expect(await keys.sandboxKey("ses_b")).toBe(deriveSandboxKey(MASTER, "ses_b"));
    expect(secrets.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input)).toEqual([{ SecretId: ARN }]);
  });

  it("a failed read is not cached: the next call reads again", async () => {
    secrets
      .on(GetSecretValueCommand)
      .rejectsOnce(new InternalServiceError({ message: "slow down", $metadata: {} }))
      .resolves({ SecretString: MASTER });
    const keys = keyringFromEnv({ SANDBOX_ACCESS_KEY_SECRET_ARN: ARN }, client);
    await expect(keys.sandboxKey("ses_a")).rejects.toThrow("slow down");
    expect(await keys.sandboxKey("ses_a")).toBe(deriveSandboxKey(MASTER, "ses_a"));
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it("refuses a short secret without putting its value in the error", async () => {
    const short = "short-but-secret";
    secrets.on(GetSecretValueCommand).resolves({ SecretString: short });
    const err = await keyringFromEnv({ SANDBOX_ACCESS_KEY_SECRET_ARN: ARN }, client).sandboxKey("ses_a").catch((e: unknown) => e);
    expect(String(err)).toContain("at least 32 characters");
    expect(inspect(err, { depth: 10 })).not.toContain(short);
  });

  it("with neither variable, fails on use naming both (the runtime still starts)", async () => {
    const keys = keyringFromEnv({}, client);
    await expect(keys.sandboxKey("ses_a")).rejects.toThrow("neither SANDBOX_ACCESS_KEY nor SANDBOX_ACCESS_KEY_SECRET_ARN is set");
  });

  it("a static master key that is too short fails at construction", () => {
    expect(() => staticKeyring("too-short")).toThrow("at least 32 characters");
  });
});
