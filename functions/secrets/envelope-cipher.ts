/**
 * Envelope encryption of one org secret's value: AES-256-GCM under a fresh random 256-bit data
 * key, the data key wrapped by a `SecretKeyWrapper` (KMS in AWS). Both layers bind the secret's
 * context (org and name): the data key through the wrapper (KMS encryption context), the value
 * through GCM's additional authenticated data, so an envelope copied to another org's or name's
 * item fails to decrypt instead of revealing its value there.
 *
 * What must stay true: the plaintext value exists only in memory, never in the envelope, an
 * error or a log line; a data key is used for one value only, and wiped once used.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import * as z from "zod";
import { InternalError, ValidationError } from "../domain/errors";
import type { SecretContext, SecretKeyWrapper } from "../ports/secret-key-wrapper";

/** API.md "Secrets": a value is at most 32 KiB (UTF-8 bytes). */
export const MAX_SECRET_VALUE_BYTES = 32 * 1024;

const ALGORITHM = "aes-256-gcm";
const IV_BYTES = 12;
const TAG_BYTES = 16;
const DATA_KEY_BYTES = 32;

/** What the table stores for a value (base64 strings): never the value itself. */
export const SecretEnvelope = z.object({
  v: z.literal(1),
  alg: z.literal("AES-256-GCM"),
  wrappedKey: z.string().min(1),
  iv: z.string().min(1),
  ciphertext: z.string(),
  tag: z.string().min(1),
});
export type SecretEnvelope = z.infer<typeof SecretEnvelope>;

/** A secret's stored value did not decrypt: wrong context, altered envelope, or another master key. Never carries the value. */
export class SecretDecryptionError extends InternalError {
  constructor(context: SecretContext, options: { cause?: unknown } = {}) {
    super(`secret ${context.name} of org ${context.orgId} could not be decrypted`, { ...options, context: { orgId: context.orgId, secretName: context.name } });
    this.name = "SecretDecryptionError";
  }
}

/**
 * The additional authenticated data for one purpose and context: unambiguous (JSON of an array),
 * so no org/name pair can be spelled as another.
 */
export function contextAad(purpose: "secret-value" | "secret-data-key", context: SecretContext): Buffer {
  return Buffer.from(JSON.stringify([purpose, 1, context.orgId, context.name]), "utf8");
}

export function assertSecretValueSize(value: string): void {
  if (value.length === 0) throw new ValidationError("value: must not be empty");
  const bytes = Buffer.byteLength(value, "utf8");
  if (bytes > MAX_SECRET_VALUE_BYTES) throw new ValidationError(`value: must be at most ${MAX_SECRET_VALUE_BYTES} bytes (UTF-8), got ${bytes}`);
}

/** Encrypts `value` for `context` under a fresh data key. */
export async function sealSecret(wrapper: SecretKeyWrapper, value: string, context: SecretContext): Promise<SecretEnvelope> {
  assertSecretValueSize(value);
  const dataKey = randomBytes(DATA_KEY_BYTES);
  try {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, dataKey, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(contextAad("secret-value", context));
    const ciphertext = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
    const wrappedKey = await wrapper.wrap(dataKey, context);
    return {
      v: 1,
      alg: "AES-256-GCM",
      wrappedKey: Buffer.from(wrappedKey).toString("base64"),
      iv: iv.toString("base64"),
      ciphertext: ciphertext.toString("base64"),
      tag: cipher.getAuthTag().toString("base64"),
    };
  } finally {
    dataKey.fill(0);
  }
}

/** Decrypts an envelope sealed for `context`; `SecretDecryptionError` if it was sealed for another, or altered. */
export async function openSecret(wrapper: SecretKeyWrapper, envelope: SecretEnvelope, context: SecretContext): Promise<string> {
  const dataKey = Buffer.from(await wrapper.unwrap(Buffer.from(envelope.wrappedKey, "base64"), context));
  try {
    const iv = Buffer.from(envelope.iv, "base64");
    const tag = Buffer.from(envelope.tag, "base64");
    if (dataKey.length !== DATA_KEY_BYTES || iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SecretDecryptionError(context);
    const decipher = createDecipheriv(ALGORITHM, dataKey, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(contextAad("secret-value", context));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(Buffer.from(envelope.ciphertext, "base64")), decipher.final()]).toString("utf8");
  } catch (err) {
    if (err instanceof SecretDecryptionError) throw err;
    // GCM authentication failed ("unable to authenticate data"): the message holds no plaintext.
    throw new SecretDecryptionError(context, { cause: err });
  } finally {
    dataKey.fill(0);
  }
}
