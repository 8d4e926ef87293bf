/**
 * The KMS key wrapper against a mocked KMS client (aws-sdk-client-mock): the exact commands it
 * sends (key pinned, org and name as encryption context), the errors it maps on purpose, and its
 * lazy configuration from SECRETS_KMS_KEY_ARN.
 */
import { afterEach, describe, expect, it } from "vitest";
import { mockClient } from "aws-sdk-client-mock";
import { DecryptCommand, EncryptCommand, InvalidCiphertextException, KMSClient, KMSInvalidStateException } from "@aws-sdk/client-kms";
import { KmsSecretKeyWrapper, kmsKeyWrapperFromEnv } from "../../functions/secrets/kms-key-wrapper";
import { SecretDecryptionError, openSecret, sealSecret } from "../../functions/secrets/envelope-cipher";

const KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
const ctx = { orgId: "acme", name: "ANTHROPIC_API_KEY" };
const VALUE = "sk-ant-api03-value-that-must-never-leave-memory";
const $metadata = {};
const kms = mockClient(KMSClient);

afterEach(() => kms.reset());

describe("KmsSecretKeyWrapper", () => {
  it("wraps with Encrypt and unwraps with Decrypt on the configured key, the org and name as encryption context", async () => {
    const blob = Uint8Array.from([9, 8, 7, 6, 5]);
    let wrappedDataKey: Uint8Array | undefined;
    kms.on(EncryptCommand).callsFake((input: { Plaintext: Uint8Array }) => {
      wrappedDataKey = Uint8Array.from(input.Plaintext);
      return { CiphertextBlob: blob, KeyId: KEY_ARN, $metadata };
    });
    kms.on(DecryptCommand).callsFake(() => ({ Plaintext: wrappedDataKey, KeyId: KEY_ARN, $metadata }));
    const wrapper = new KmsSecretKeyWrapper(() => new KMSClient({ region: "eu-west-1" }), KEY_ARN);

    const envelope = await sealSecret(wrapper, VALUE, ctx);
    expect(Buffer.from(envelope.wrappedKey, "base64")).toEqual(Buffer.from(blob));
    expect(await openSecret(wrapper, envelope, ctx)).toBe(VALUE);

    const encrypts = kms.commandCalls(EncryptCommand);
    expect(encrypts).toHaveLength(1);
    const encryptInput = encrypts[0]?.args[0].input;
    expect(Object.keys(encryptInput ?? {}).sort()).toEqual(["EncryptionContext", "KeyId", "Plaintext"]);
    expect(encryptInput).toMatchObject({ KeyId: KEY_ARN, EncryptionContext: { orgId: "acme", name: "ANTHROPIC_API_KEY" } });
    // The data key (32 random bytes), never the value itself, goes to KMS.
    expect(encryptInput?.Plaintext).toHaveLength(32);
    expect(Buffer.from(encryptInput?.Plaintext ?? []).toString("utf8")).not.toContain(VALUE);

    const decrypts = kms.commandCalls(DecryptCommand);
    expect(decrypts).toHaveLength(1);
    expect(decrypts[0]?.args[0].input).toEqual({ KeyId: KEY_ARN, CiphertextBlob: Buffer.from(blob), EncryptionContext: { orgId: "acme", name: "ANTHROPIC_API_KEY" } });
  });

  it("maps KMS refusing the ciphertext (wrong context, other key) to SecretDecryptionError", async () => {
    kms.on(DecryptCommand).rejects(new InvalidCiphertextException({ message: "invalid ciphertext", $metadata }));
    const wrapper = new KmsSecretKeyWrapper(() => new KMSClient({ region: "eu-west-1" }), KEY_ARN);
    const err = await wrapper.unwrap(Uint8Array.from([1, 2, 3]), ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SecretDecryptionError);
    expect((err as SecretDecryptionError).cause).toBeInstanceOf(InvalidCiphertextException);
  });

  it("lets other KMS errors through unchanged (a disabled key, throttling: not a bad ciphertext)", async () => {
    const disabled = new KMSInvalidStateException({ message: "key is disabled", $metadata });
    kms.on(DecryptCommand).rejects(disabled);
    const wrapper = new KmsSecretKeyWrapper(() => new KMSClient({ region: "eu-west-1" }), KEY_ARN);
    await expect(wrapper.unwrap(Uint8Array.from([1, 2, 3]), ctx)).rejects.toBe(disabled);
  });
});

describe("kmsKeyWrapperFromEnv", () => {
  it("builds nothing until the first wrap or unwrap, then fails naming the missing variable", async () => {
    let clients = 0;
    const wrapper = kmsKeyWrapperFromEnv({}, () => {
      clients++;
      return new KMSClient({ region: "eu-west-1" });
    });
    expect(clients).toBe(0);
    await expect(wrapper.wrap(new Uint8Array(32), ctx)).rejects.toThrow("invalid configuration: SECRETS_KMS_KEY_ARN is not set");
    await expect(kmsKeyWrapperFromEnv({ SECRETS_KMS_KEY_ARN: "alias/secrets" }).unwrap(new Uint8Array(3), ctx)).rejects.toThrow(
      "invalid configuration: SECRETS_KMS_KEY_ARN must be a KMS key ARN",
    );
    expect(clients).toBe(0);
  });

  it("uses the key from SECRETS_KMS_KEY_ARN, one client for every call", async () => {
    kms.on(EncryptCommand).resolves({ CiphertextBlob: Uint8Array.from([1]), $metadata });
    let clients = 0;
    const wrapper = kmsKeyWrapperFromEnv({ SECRETS_KMS_KEY_ARN: KEY_ARN }, () => {
      clients++;
      return new KMSClient({ region: "eu-west-1" });
    });
    await wrapper.wrap(new Uint8Array(32), ctx);
    await wrapper.wrap(new Uint8Array(32), { orgId: "other", name: "X" });
    expect(clients).toBe(1);
    expect(kms.commandCalls(EncryptCommand).map((c) => [c.args[0].input.KeyId, c.args[0].input.EncryptionContext])).toEqual([
      [KEY_ARN, { orgId: "acme", name: "ANTHROPIC_API_KEY" }],
      [KEY_ARN, { orgId: "other", name: "X" }],
    ]);
  });
});
