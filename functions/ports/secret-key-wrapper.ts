/**
 * The seam to whatever protects secret data keys (envelope encryption, functions/secrets/):
 * AWS KMS in AWS, a local master key locally and in tests. The context is bound to the wrapped
 * key (KMS encryption context, GCM additional data): a wrapped key copied to another org or name
 * does not unwrap.
 */
export interface SecretContext {
  orgId: string;
  name: string;
}

export interface SecretKeyWrapper {
  /** The data key encrypted under the master key, bound to `context`. */
  wrap(dataKey: Uint8Array, context: SecretContext): Promise<Uint8Array>;
  /** The data key back; `SecretDecryptionError` when `wrapped` was not wrapped for `context` (or was altered). */
  unwrap(wrapped: Uint8Array, context: SecretContext): Promise<Uint8Array>;
}
