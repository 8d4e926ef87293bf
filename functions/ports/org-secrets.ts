/**
 * Org secrets (API.md "Secrets"): named values an org's admins store once and sessions use by
 * name (git credentials, model keys). Values are write-only over the API: only metadata is ever
 * returned; `reveal` is for the control plane itself (the provision step).
 */

/** API.md "Secrets": names like environment variables (one definition, in the domain). */
export { SECRET_NAME_PATTERN } from "../domain/agent-settings";
export interface SecretMetadata { name: string; description: string | null; createdAt: string; updatedAt: string }
export interface OrgSecretStore {
  /** Creates or replaces (rotation): createdAt kept on replace, updatedAt moves. */
  put(input: { orgId: string; name: string; value: string; description?: string | null; now: Date }): Promise<SecretMetadata>;
  get(orgId: string, name: string): Promise<SecretMetadata | null>;
  /** All of an org's secrets' metadata, by name. */
  list(orgId: string): Promise<SecretMetadata[]>;
  /** True when something was deleted. */
  delete(orgId: string, name: string): Promise<boolean>;
  /** Which of `names` exist in the org (session create validates references with it). */
  existing(orgId: string, names: readonly string[]): Promise<Set<string>>;
  /** Decrypted values of those of `names` that exist (missing names are absent). Values never logged. */
  reveal(orgId: string, names: readonly string[]): Promise<Record<string, string>>;
}
