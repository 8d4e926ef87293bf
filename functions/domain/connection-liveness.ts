/**
 * When a WebSocket client connection still counts as present (issue 14 §3). A connection item
 * carries `expiresAt`: a client that vanished without a `$disconnect` (an aborted handshake, a
 * crashed host, a lost `$disconnect` invocation) stops counting once it passes, instead of
 * keeping its session awake forever. Activity pushes it forward: every client frame in AWS
 * (API Gateway closes a connection that sends nothing for 10 minutes, so a live one always
 * has), plus answered pings on the local server. Pure: the caller passes `now`.
 */

/**
 * A connection that has not been sent its `init` by then never will be (send-init gives up after
 * a few seconds): until `markReady` it lives this long at most, so a half-registered connection
 * neither blocks an idle snapshot nor inflates `connectedClients` for a whole TTL.
 */
export const CONNECTION_INIT_DEADLINE_SECONDS = 60;

/** API Gateway's hard limit on one WebSocket connection: items written before `expiresAt` existed expire this long after `connectedAt`. */
export const MAX_CONNECTION_SECONDS = 2 * 60 * 60;

export interface ConnectionTimes {
  connectedAt: string;
  expiresAt?: string | undefined;
}

export function connectionExpiry(connection: ConnectionTimes): Date {
  if (connection.expiresAt) return new Date(connection.expiresAt);
  return new Date(Date.parse(connection.connectedAt) + MAX_CONNECTION_SECONDS * 1000);
}

export function isLiveConnection(connection: ConnectionTimes, now: Date): boolean {
  return connectionExpiry(connection).getTime() > now.getTime();
}

/** `expiresAt` for a connection seen active at `now`. */
export function connectionExpiresAt(now: Date, ttlSeconds: number): Date {
  return new Date(now.getTime() + ttlSeconds * 1000);
}

/** `expiresAt` for a connection just registered, not yet sent its `init`. */
export function unreadyConnectionExpiresAt(now: Date, ttlSeconds: number): Date {
  return connectionExpiresAt(now, Math.min(ttlSeconds, CONNECTION_INIT_DEADLINE_SECONDS));
}

/**
 * Whether activity at `now` should write a new expiry: only once half the TTL is used up, so a
 * chatty client costs one write per half TTL, not one per frame.
 */
export function connectionRefreshDue(connection: ConnectionTimes, now: Date, ttlSeconds: number): boolean {
  return connectionExpiry(connection).getTime() - now.getTime() < (ttlSeconds * 1000) / 2;
}

/** DynamoDB TTL attribute value (epoch seconds) for an ISO expiry: DynamoDB deletes the item some time after it. */
export function ttlEpochSeconds(expiresAt: string | Date): number {
  return Math.ceil(new Date(expiresAt).getTime() / 1000);
}
