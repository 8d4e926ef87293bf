/**
 * Bearer auth for every route but `/health` (seed 003 §7 "sandbox-mcp auth"): secure by default,
 * so no configured token means every request is refused. Two credentials open the sidecar:
 *
 * - the sandbox key itself (`SIDECAR_TOKEN`): the control plane's own calls. The comparison
 *   hashes both sides to a fixed length first, so `timingSafeEqual` never leaks the token's
 *   length or a common prefix;
 * - a short-lived access token the control plane minted for a user (sandbox/shared/access-token.ts),
 *   signed with the sandbox key for this session (`SESSION_ID`) and not expired. Without a
 *   session id the sidecar cannot check whose token it is, so access tokens are refused.
 *
 * Header only: never a query string (it would end up in proxy and browser logs).
 *
 * An access token's expiry also bounds what it opened (issue 14 item 5): a terminal or a log
 * stream is closed when the token that opened it expires (`whenAccessExpires`), so a token that
 * has run out cannot keep a shell. The sandbox key has no expiry: what it opens is not timed.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { looksLikeAccessToken, verifyAccessToken } from "../shared/access-token";

/** The credential of an `Authorization: Bearer <token>` header, or null. */
export function bearerCredential(header: string | string[] | undefined): string | null {
  if (typeof header !== "string") return null;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1] ?? null;
}

/** The subprotocol a browser terminal offers beside its `bearer.<token>` one; the only one the sidecar selects. */
export const TERMINAL_PROTOCOL = "sidecar.terminal";

/**
 * A browser cannot set `Authorization` on a WebSocket: it offers the token as the subprotocol
 * `bearer.<token>` (`Sec-WebSocket-Protocol`, a header like `Authorization`, so never in a URL or
 * an access log) next to `sidecar.terminal`. Returns it as an `Authorization` value, or undefined.
 */
export function protocolCredential(header: string | string[] | undefined): string | undefined {
  if (typeof header !== "string") return undefined;
  const offers = header.split(",").map((p) => p.trim());
  if (!offers.includes(TERMINAL_PROTOCOL)) return undefined;
  const bearer = offers.find((p) => p.startsWith("bearer.") && p.length > "bearer.".length);
  return bearer ? `Bearer ${bearer.slice("bearer.".length)}` : undefined;
}

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

export function tokenMatches(presented: string | null, expected: string | undefined): boolean {
  if (!expected || !presented) return false;
  return timingSafeEqual(digest(presented), digest(expected));
}

export interface AuthConfig {
  /** The sandbox key (`SIDECAR_TOKEN`); undefined or empty refuses everything. */
  token: string | undefined;
  /** This sandbox's session (`SESSION_ID`); undefined refuses access tokens. */
  sessionId?: string | undefined;
  /** Epoch milliseconds; default `Date.now`. */
  now?: () => number;
}

/** Who a request is: the control plane (the sandbox key) or a user's access token. */
export type Caller = { kind: "sandbox-key"; credential: string } | { kind: "access-token"; credential: string; expiresAt: number };

/** The caller behind an `Authorization` header, or null when it opens nothing. */
export function authenticate(header: string | string[] | undefined, config: AuthConfig): Caller | null {
  const presented = bearerCredential(header);
  if (!config.token || !presented) return null;
  if (tokenMatches(presented, config.token)) return { kind: "sandbox-key", credential: presented };
  if (!config.sessionId || !looksLikeAccessToken(presented)) return null;
  const nowSeconds = Math.floor((config.now ?? Date.now)() / 1000);
  const verdict = verifyAccessToken(presented, config.token, { sessionId: config.sessionId, nowSeconds });
  return verdict.ok ? { kind: "access-token", credential: presented, expiresAt: verdict.claims.exp } : null;
}

export function authorized(header: string | string[] | undefined, config: AuthConfig): boolean {
  return authenticate(header, config) !== null;
}

/** setTimeout's largest delay (about 24.8 days); access tokens live at most a day. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `onExpired` once when the caller's access token expires (at once if it already has);
 * nothing for the sandbox key. Returns a cancel function for when the connection ends first.
 */
export function whenAccessExpires(caller: Caller, onExpired: () => void, now: () => number = Date.now): () => void {
  if (caller.kind !== "access-token") return () => undefined;
  const delay = Math.min(Math.max(0, caller.expiresAt * 1000 - now()), MAX_TIMER_MS);
  const timer = setTimeout(onExpired, delay);
  timer.unref();
  return () => clearTimeout(timer);
}
