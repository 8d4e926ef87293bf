/**
 * Revoking an API token (issue 14 item 5), called by `npm run token:revoke` (scripts/) and the
 * local runtime. Steps:
 * 1. find the token by its id, a unique prefix of its id, or the token itself;
 * 2. mark it revoked: from then on every HTTP route and every WebSocket `$connect` answers 401;
 * 3. for each WebSocket connection it opened (registered under its id at `$connect`): mark the
 *    connection revoked (its next frame is refused and closes it, should step 4 not reach it),
 *    then close it through the client push (API Gateway `DeleteConnection`; the local socket).
 * Idempotent: revoking twice keeps the first time and closes whatever is still open.
 */
import type { ClientPush } from "../ports/client-push";
import type { DynamoApiTokenStore, TokenSummary } from "../store/dynamo-session-store";

export type TokenRevocationStore = Pick<DynamoApiTokenStore, "findTokenHash" | "revoke" | "connectionsOf" | "markConnectionRevoked" | "untrackConnection">;

export interface RevocationReport {
  token: TokenSummary;
  /** Connections closed now (API Gateway / the local server closed them). */
  closed: string[];
  /** Connections found already gone (their `$disconnect` had not cleaned up yet). */
  gone: string[];
  /** Connections marked revoked but not closed (no push configured): their next frame closes them. */
  marked: string[];
}

export async function revokeApiToken(
  deps: { tokens: TokenRevocationStore; push: Pick<ClientPush, "disconnect"> | null },
  ref: string,
  now: Date,
): Promise<RevocationReport> {
  const token = await deps.tokens.revoke(await deps.tokens.findTokenHash(ref), now);
  const report: RevocationReport = { token, closed: [], gone: [], marked: [] };
  for (const { connectionId } of await deps.tokens.connectionsOf(token.tokenId)) {
    const live = await deps.tokens.markConnectionRevoked(connectionId, now);
    if (!deps.push) {
      (live ? report.marked : report.gone).push(connectionId);
      continue;
    }
    if ((await deps.push.disconnect(connectionId)) === "sent") report.closed.push(connectionId);
    else {
      report.gone.push(connectionId);
      // Closed without telling us (no `$disconnect` will come): forget it here.
      await deps.tokens.untrackConnection(token.tokenId, connectionId);
    }
  }
  return report;
}
