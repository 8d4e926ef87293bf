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
import { keyringFromEnv, sessionKeyEpochs, staticKeyring } from "../../functions/config/sandbox-keyring";
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

  it("derives the session's current key epoch's key, read from its record on every call; any epoch on demand", async () => {
    const stored = new Map<string, { sandboxKeyEpoch?: number }>([["ses_new", { sandboxKeyEpoch: 3 }], ["ses_old", {}]]);
    const sessions = { getSession: async (id: string) => (stored.get(id) ?? null) as never };
    const keys = keyringFromEnv({ SANDBOX_ACCESS_KEY: MASTER }, client, sessionKeyEpochs(sessions));
    expect(await keys.currentEpoch("ses_new")).toBe(3);
    expect(await keys.sandboxKey("ses_new")).toBe(deriveSandboxKey(MASTER, "ses_new", 3));
    expect(await keys.sandboxKey("ses_new", 1)).toBe(deriveSandboxKey(MASTER, "ses_new", 1));
    // Stored before epochs, or unknown: the v1 key.
    expect(await keys.sandboxKey("ses_old")).toBe(deriveSandboxKey(MASTER, "ses_old"));
    expect(await keys.currentEpoch("ses_missing")).toBe(0);
    stored.set("ses_old", { sandboxKeyEpoch: 1 });
    expect(await keys.sandboxKey("ses_old")).toBe(deriveSandboxKey(MASTER, "ses_old", 1));
    // Without an epoch source every session is at epoch 0.
    expect(await staticKeyring(MASTER).sandboxKey("ses_new")).toBe(deriveSandboxKey(MASTER, "ses_new"));
  });
});
