/**
 * Envelope encryption of org secrets (functions/secrets/): values round-trip, are bound to their
 * org and name at both layers, fail closed when altered, and never appear in the stored envelope
 * or in an error.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../functions/domain/errors";
import type { SecretContext, SecretKeyWrapper } from "../../functions/ports/secret-key-wrapper";
import { MAX_SECRET_VALUE_BYTES, SecretDecryptionError, openSecret, sealSecret, type SecretEnvelope } from "../../functions/secrets/envelope-cipher";
import { LocalSecretKeyWrapper, parseSecretsMasterKey } from "../../functions/secrets/local-key-wrapper";

const VALUE = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789 ünïcødé ✓";
const ctx: SecretContext = { orgId: "acme", name: "GITHUB_TOKEN" };
const wrapper = new LocalSecretKeyWrapper(Buffer.alloc(32, 1));

/** A wrapper that ignores the context: isolates the value layer's own binding (GCM AAD). */
const contextBlind: SecretKeyWrapper = {
  wrap: (dataKey) => Promise.resolve(Buffer.from(dataKey)),
  unwrap: (wrapped) => Promise.resolve(Buffer.from(wrapped)),
};

/** Flips one bit of a base64 field. */
function flip(b64: string, byte = 0): string {
  const bytes = Buffer.from(b64, "base64");
  bytes[byte] = (bytes[byte] ?? 0) ^ 0x01;
  return bytes.toString("base64");
}

async function expectDecryptionError(promise: Promise<unknown>): Promise<SecretDecryptionError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SecretDecryptionError);
  expect(String((err as Error).message)).not.toContain(VALUE);
  return err as SecretDecryptionError;
}

describe("sealSecret / openSecret", () => {
  it("round-trips values, including multi-byte text and the 32 KiB maximum", async () => {
    expect(await openSecret(wrapper, await sealSecret(wrapper, VALUE, ctx), ctx)).toBe(VALUE);
    const largest = "x".repeat(MAX_SECRET_VALUE_BYTES);
    expect(await openSecret(wrapper, await sealSecret(wrapper, largest, ctx), ctx)).toBe(largest);
  });

  it("never holds the value in plaintext (nor base64 of it): the envelope is all that is stored", async () => {
    const envelope = await sealSecret(wrapper, VALUE, ctx);
    const stored = JSON.stringify(envelope);
    expect(stored).not.toContain(VALUE);
    expect(stored).not.toContain("ghp_0123456789");
    expect(stored).not.toContain(Buffer.from(VALUE).toString("base64").slice(0, 16));
    expect(Object.keys(envelope).sort()).toEqual(["alg", "ciphertext", "iv", "tag", "v", "wrappedKey"]);
  });

  it("uses a fresh data key and IV for every value: the same value seals differently twice", async () => {
    const a = await sealSecret(wrapper, VALUE, ctx);
    const b = await sealSecret(wrapper, VALUE, ctx);
    expect(a.wrappedKey).not.toBe(b.wrappedKey);
    expect(a.iv).not.toBe(b.iv);
    expect(a.ciphertext).not.toBe(b.ciphertext);
  });

  it("fails for another org or another name (an envelope copied to another item does not decrypt)", async () => {
    const envelope = await sealSecret(wrapper, VALUE, ctx);
    const err = await expectDecryptionError(openSecret(wrapper, envelope, { ...ctx, orgId: "other-org" }));
    expect(err.status).toBe(500);
    expect(err.message).toBe("secret GITHUB_TOKEN of org other-org could not be decrypted");
    await expectDecryptionError(openSecret(wrapper, envelope, { ...ctx, name: "GITHUB_TOKEN_2" }));
  });

  it("binds the context in the value layer too, whatever the key wrapper does", async () => {
    const envelope = await sealSecret(contextBlind, VALUE, ctx);
    expect(await openSecret(contextBlind, envelope, ctx)).toBe(VALUE);
    await expectDecryptionError(openSecret(contextBlind, envelope, { ...ctx, orgId: "other-org" }));
    // No org/name pair spells another: the AAD is not a plain concatenation.
    const glued = await sealSecret(contextBlind, VALUE, { orgId: "acme", name: "X" });
    await expectDecryptionError(openSecret(contextBlind, glued, { orgId: "acm", name: "eX" }));
  });

  it("fails when the ciphertext, tag, IV or wrapped key is altered", async () => {
    const envelope = await sealSecret(wrapper, VALUE, ctx);
    const tampered: SecretEnvelope[] = [
      { ...envelope, ciphertext: flip(envelope.ciphertext, 3) },
      { ...envelope, tag: flip(envelope.tag) },
      { ...envelope, iv: flip(envelope.iv) },
      { ...envelope, wrappedKey: flip(envelope.wrappedKey, 20) },
      { ...envelope, tag: Buffer.from(envelope.tag, "base64").subarray(0, 8).toString("base64") },
    ];
    for (const t of tampered) await expectDecryptionError(openSecret(wrapper, t, ctx));
  });

  it("fails under another master key", async () => {
    const envelope = await sealSecret(wrapper, VALUE, ctx);
    await expectDecryptionError(openSecret(new LocalSecretKeyWrapper(Buffer.alloc(32, 2)), envelope, ctx));
  });

  it("refuses an empty value and one over 32 KiB of UTF-8, without echoing it", async () => {
    await expect(sealSecret(wrapper, "", ctx)).rejects.toBeInstanceOf(ValidationError);
    // 16,385 three-byte characters: under the character limit, over the byte limit.
    const big = "€".repeat(MAX_SECRET_VALUE_BYTES / 2 + 1);
    const err = (await sealSecret(wrapper, big, ctx).catch((e: unknown) => e)) as ValidationError;
    expect(err).toBeInstanceOf(ValidationError);
    expect(err.message).toBe(`value: must be at most 32768 bytes (UTF-8), got ${Buffer.byteLength(big)}`);
  });
});

describe("parseSecretsMasterKey", () => {
  const key = Buffer.from(Array.from({ length: 32 }, (_, i) => i * 7));

  it("accepts 32 bytes as hex, base64 or base64url", () => {
    expect(parseSecretsMasterKey(key.toString("hex"))).toEqual(key);
    expect(parseSecretsMasterKey(key.toString("base64"))).toEqual(key);
    expect(parseSecretsMasterKey(`${key.toString("base64url")}\n`)).toEqual(key);
  });

  it("refuses any other length, naming the variable and never the value", () => {
    for (const bad of ["short-secret-value", key.subarray(0, 16).toString("hex"), Buffer.alloc(33).toString("base64"), "not base64 at all!"]) {
      let message = "";
      try {
        parseSecretsMasterKey(bad);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toBe("invalid configuration: SECRETS_MASTER_KEY must be 32 bytes, as 64 hex characters or base64");
      expect(message).not.toContain(bad);
    }
  });
});
