/**
 * Bearer auth for every route but `/health` (seed 003 §7 "sandbox-mcp auth"): secure by default,
 * so no configured token means every request is refused. The comparison hashes both sides to a
 * fixed length first, so `timingSafeEqual` never leaks the token's length or a common prefix.
 */
import { createHash, timingSafeEqual } from "node:crypto";

/** The credential of an `Authorization: Bearer <token>` header, or null. */
export function bearerCredential(header: string | string[] | undefined): string | null {
  if (typeof header !== "string") return null;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1] ?? null;
}

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

export function tokenMatches(presented: string | null, expected: string | undefined): boolean {
  if (!expected || !presented) return false;
  return timingSafeEqual(digest(presented), digest(expected));
}

export function authorized(header: string | string[] | undefined, expected: string | undefined): boolean {
  return tokenMatches(bearerCredential(header), expected);
}
