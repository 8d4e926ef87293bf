/**
 * WebSocket connect tickets (API.md v1.1 "WebSocket connect tickets", issue 14 item 5): a browser
 * trades its API token for a ticket over HTTP (header auth) and connects with
 * `?sessionId=<id>&ticket=<ticket>`, so the API token never sits in a URL. A ticket is single
 * use, lives at most 60 s, and is bound to one session and to the principal (and API token) that
 * minted it. Only its SHA-256 is stored.
 */
import type { Role } from "../domain/principal";

/** What a ticket grants: one connect to `sessionId` as this principal, until `expiresAt`. */
export interface WsTicketGrant {
  sessionId: string;
  userId: string;
  orgId: string;
  role: Role;
  /** The API token that minted it (its SHA-256): the connect re-checks that token is still valid. */
  tokenHash: string | null;
  expiresAt: string;
}

export interface WsTicketStore {
  /** Stores the ticket's hash with its grant. */
  issue(ticket: string, grant: WsTicketGrant, now: Date): Promise<void>;
  /**
   * Uses the ticket up: the grant the first time (whatever it says; the caller checks session and
   * expiry), null for an unknown or already used ticket. Exactly one of concurrent callers wins.
   */
  consume(ticket: string, now: Date): Promise<WsTicketGrant | null>;
}
