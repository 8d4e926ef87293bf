import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"; // Crockford base32, lower case

/** `ses_` + 26 base32 characters (130 random bits): unguessable, URL-safe, fixed length. */
export function newSessionId(): string {
  const bytes = randomBytes(26);
  let out = "ses_";
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}

/** `sbx_` + 43 base64url characters (256 random bits): the shape of an API token. */
export function newApiToken(): string {
  return `sbx_${randomBytes(32).toString("base64url")}`;
}

/**
 * A time-ordered id with a prefix: 10 base32 characters of milliseconds since the epoch, then 16
 * random ones, so ids sort by creation time and never collide.
 */
export function newSortableId(prefix: string, now: Date = new Date()): string {
  let ms = now.getTime();
  let time = "";
  for (let i = 0; i < 10; i++) {
    time = (ALPHABET[ms % 32] ?? "0") + time;
    ms = Math.floor(ms / 32);
  }
  const bytes = randomBytes(16);
  let rand = "";
  for (const b of bytes) rand += ALPHABET[b & 31];
  return `${prefix}_${time}${rand}`;
}
