/**
 * Secrets named by a request (a repo's `credential`, a model's `apiKeySecret`, an env key's
 * `secret`) must exist in the caller's org when the request is made: a reference that would only
 * fail at boot is a 400 now, naming the field.
 */
import * as z from "zod";
import { ValidationError } from "../domain/errors";
import { SECRET_NAME_PATTERN, type OrgSecretStore } from "../ports/org-secrets";

/** `{name}` of the `/v1/secrets/{name}` routes. */
export const SecretPathParams = z
  .object({ name: z.string().regex(SECRET_NAME_PATTERN, "must match [A-Za-z_][A-Za-z0-9_]{0,127} (letters, digits and '_', not starting with a digit)") })
  .strict();

export interface SecretReference {
  /** The request field that names the secret, e.g. `body.repos.0.credential`. */
  field: string;
  name: string;
}

export async function requireSecretsExist(secrets: Pick<OrgSecretStore, "existing">, orgId: string, refs: readonly SecretReference[]): Promise<void> {
  if (refs.length === 0) return;
  const existing = await secrets.existing(orgId, [...new Set(refs.map((r) => r.name))]);
  const missing = refs.find((r) => !existing.has(r.name));
  if (missing) throw new ValidationError(`${missing.field}: no secret named "${missing.name}" in this organization`, "unknown_secret");
}
