/** API.md "Roles": what an API token may do. Routes marked admin answer 403 to a member. */
export const ROLES = ["admin", "member"] as const;
export type Role = (typeof ROLES)[number];

/**
 * Who is calling: an API token resolves to one user in one org, with a role. Sessions are
 * visible to their org only.
 */
export interface Principal {
  userId: string;
  orgId: string;
  role: Role;
  /**
   * The API token the caller presented (issue 14 item 5): its public id (`tok_...`), its SHA-256
   * (the stored key; never the token) and expiry. A WebSocket connection keeps the id and the
   * expiry, so revoking or expiring the token ends it; a connect ticket keeps the hash to re-check it.
   */
  credential?: { tokenId: string; tokenHash: string; expiresAt: string | null };
}
