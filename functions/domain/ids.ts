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
