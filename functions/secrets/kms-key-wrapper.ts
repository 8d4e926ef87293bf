/**
 * The AWS `SecretKeyWrapper`: one customer-managed KMS key (SECRETS_KMS_KEY_ARN) wraps every
 * secret's data key with `Encrypt` and unwraps it with `Decrypt`, the secret's org and name as
 * the encryption context (KMS refuses to decrypt under any other context, and CloudTrail records
 * which secret each call was for). The data key never leaves memory unwrapped.
 *
 * Who may call which is IAM's business (infra/control-plane-stack.ts): routes that store secrets
 * may only `kms:Encrypt`, what reveals them (the provision step) only `kms:Decrypt`.
 *
 * The KMS SDK is loaded on the first wrap or unwrap (functions/adapters/aws/sdk-client.ts).
 */
import type { KMSClient } from "@aws-sdk/client-kms";
import * as z from "zod";
import { onFirstUse, type ClientFactory } from "../adapters/aws/sdk-client";
import type { SecretContext, SecretKeyWrapper } from "../ports/secret-key-wrapper";
import { SecretDecryptionError } from "./envelope-cipher";

const sdk = () => import("@aws-sdk/client-kms");

/** A KMS client, its SDK loaded by this call. */
export async function kmsClient(): Promise<KMSClient> {
  return new (await sdk()).KMSClient({});
}

/** KMS errors that mean "this ciphertext is not for this key and context": not worth a retry. */
const NOT_DECRYPTABLE = new Set(["InvalidCiphertextException", "IncorrectKeyException"]);

export function encryptionContext(context: SecretContext): Record<string, string> {
  return { orgId: context.orgId, name: context.name };
}

export class KmsSecretKeyWrapper implements SecretKeyWrapper {
  private readonly client: () => Promise<KMSClient>;

  constructor(
    client: ClientFactory<KMSClient>,
    private readonly keyArn: string,
  ) {
    this.client = onFirstUse(client);
  }

  async wrap(dataKey: Uint8Array, context: SecretContext): Promise<Uint8Array> {
    const [client, { EncryptCommand }] = await Promise.all([this.client(), sdk()]);
    const out = await client.send(new EncryptCommand({ KeyId: this.keyArn, Plaintext: dataKey, EncryptionContext: encryptionContext(context) }));
    if (!out.CiphertextBlob?.length) throw new Error("KMS Encrypt returned no ciphertext");
    return out.CiphertextBlob;
  }

  async unwrap(wrapped: Uint8Array, context: SecretContext): Promise<Uint8Array> {
    const [client, { DecryptCommand }] = await Promise.all([this.client(), sdk()]);
    try {
      // KeyId pins the key: a ciphertext wrapped under any other key is refused, not decrypted.
      const out = await client.send(new DecryptCommand({ KeyId: this.keyArn, CiphertextBlob: wrapped, EncryptionContext: encryptionContext(context) }));
      if (!out.Plaintext?.length) throw new Error("KMS Decrypt returned no plaintext");
      return out.Plaintext;
    } catch (err) {
      if (NOT_DECRYPTABLE.has((err as { name?: string } | null)?.name ?? "")) throw new SecretDecryptionError(context, { cause: err });
      throw err;
    }
  }
}

const KeyArn = z.string().regex(/^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/, "must be a KMS key ARN");

/**
 * The wrapper from `SECRETS_KMS_KEY_ARN`, built on first use: functions that build the secret
 * store but never touch a value (metadata routes, WebSocket handlers) need neither the variable
 * nor a KMS client. A missing or malformed variable fails the first wrap or unwrap, naming it.
 */
export function kmsKeyWrapperFromEnv(env: Record<string, string | undefined>, client: ClientFactory<KMSClient> = kmsClient): SecretKeyWrapper {
  let wrapper: KmsSecretKeyWrapper | undefined;
  const get = (): KmsSecretKeyWrapper => {
    if (wrapper) return wrapper;
    const raw = env.SECRETS_KMS_KEY_ARN;
    if (!raw) throw new Error("invalid configuration: SECRETS_KMS_KEY_ARN is not set");
    const parsed = KeyArn.safeParse(raw);
    if (!parsed.success) throw new Error("invalid configuration: SECRETS_KMS_KEY_ARN must be a KMS key ARN");
    wrapper = new KmsSecretKeyWrapper(client, parsed.data);
    return wrapper;
  };
  return {
    wrap: async (dataKey, context) => get().wrap(dataKey, context),
    unwrap: async (wrapped, context) => get().unwrap(wrapped, context),
  };
}
