/** Who is calling: an API token resolves to one user in one org. Sessions are visible to their org only. */
export interface Principal {
  userId: string;
  orgId: string;
}
