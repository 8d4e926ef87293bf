/**
 * The local `SecretKeyWrapper` (local runtime, tests): AES-256-GCM under a 32-byte master key,
 * with the secret's context as additional authenticated data (the stand-in for KMS encryption
 * context). Wrapped key: version byte, 12-byte IV, ciphertext, 16-byte tag.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { SecretContext, SecretKeyWrapper } from "../ports/secret-key-wrapper";
import { SecretDecryptionError, contextAad } from "./envelope-cipher";

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const SECRETS_MASTER_KEY_BYTES = 32;

/**
 * A master key from its configured form (`SECRETS_MASTER_KEY`): 64 hex characters, or base64 /
 * base64url of 32 bytes. The message names the variable, never the value.
 */
export function parseSecretsMasterKey(text: string, variable = "SECRETS_MASTER_KEY"): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : /^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)
      ? Buffer.from(trimmed.replace(/-/g, "+").replace(/_/g, "/"), "base64")
      : Buffer.alloc(0);
  if (key.length !== SECRETS_MASTER_KEY_BYTES) {
    throw new Error(`invalid configuration: ${variable} must be ${SECRETS_MASTER_KEY_BYTES} bytes, as 64 hex characters or base64`);
  }
  return key;
}

export class LocalSecretKeyWrapper implements SecretKeyWrapper {
  private readonly masterKey: Buffer;

  constructor(masterKey: Uint8Array) {
    if (masterKey.length !== SECRETS_MASTER_KEY_BYTES) throw new Error(`local secrets master key must be ${SECRETS_MASTER_KEY_BYTES} bytes`);
    this.masterKey = Buffer.from(masterKey);
  }

  wrap(dataKey: Uint8Array, context: SecretContext): Promise<Uint8Array> {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.masterKey, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(contextAad("secret-data-key", context));
    const ciphertext = Buffer.concat([cipher.update(dataKey), cipher.final()]);
    return Promise.resolve(Buffer.concat([Buffer.from([VERSION]), iv, ciphertext, cipher.getAuthTag()]));
  }

  unwrap(wrapped: Uint8Array, context: SecretContext): Promise<Uint8Array> {
    const bytes = Buffer.from(wrapped);
    if (bytes.length <= 1 + IV_BYTES + TAG_BYTES || bytes[0] !== VERSION) return Promise.reject(new SecretDecryptionError(context));
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.masterKey, bytes.subarray(1, 1 + IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(contextAad("secret-data-key", context));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Promise.resolve(Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]));
    } catch (err) {
      return Promise.reject(new SecretDecryptionError(context, { cause: err }));
    }
  }
}
