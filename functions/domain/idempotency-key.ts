/**
 * `Idempotency-Key` on POST /v1/sessions/{id}/prompts (README "Idempotent prompts"): a client's
 * name for one prompt. The prompt id derives from (org, session, key), so a repeat of the request
 * (a retry, a redelivery, a twin event) finds the prompt stored first instead of storing another.
 */
import { createHash } from "node:crypto";
import * as z from "zod";

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";

/** 1-255 visible ASCII characters (no spaces or control characters). */
export const IdempotencyKey = z
  .string()
  .min(1, "must not be empty")
  .max(255, "must be at most 255 characters")
  .regex(/^[\x21-\x7e]+$/, "must be visible ASCII characters without spaces");

/** `prm_` and 26 base32 characters of SHA-256(org, session, key): stable across retries, distinct per org and session. */
export function promptIdForKey(orgId: string, sessionId: string, key: string): string {
  const digest = createHash("sha256").update(`${orgId}\u0000${sessionId}\u0000${key}`).digest();
  const alphabet = "0123456789abcdefghjkmnpqrstvwxyz";
  let out = "";
  for (let i = 0; i < 26; i++) out += alphabet[(digest[i] ?? 0) & 31];
  return `prm_k${out}`;
}
