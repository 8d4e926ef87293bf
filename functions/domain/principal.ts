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
}
