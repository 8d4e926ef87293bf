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

/** `wst_` + 43 base64url characters (256 random bits): a single-use WebSocket connect ticket. */
export function newWsTicket(): string {
  return `wst_${randomBytes(32).toString("base64url")}`;
}

let lastMs = -1;
let sequence = 0;

/**
 * A time-ordered id with a prefix: 10 base32 characters of milliseconds since the epoch, 4 of a
 * per-process sequence within that millisecond, then 12 random ones. Ids minted by one process
 * sort in the order they were minted, even within one millisecond (the prompt queue relies on
 * it); ids from different processes in the same millisecond order arbitrarily but never collide.
 */
export function newSortableId(prefix: string, now: Date = new Date()): string {
  const at = now.getTime();
  if (at === lastMs) sequence++;
  else {
    lastMs = at;
    sequence = 0;
  }
  const encode = (value: number, width: number): string => {
    let out = "";
    let v = value;
    for (let i = 0; i < width; i++) {
      out = (ALPHABET[v % 32] ?? "0") + out;
      v = Math.floor(v / 32);
    }
    return out;
  };
  const bytes = randomBytes(12);
  let rand = "";
  for (const b of bytes) rand += ALPHABET[b & 31];
  return `${prefix}_${encode(at, 10)}${encode(sequence, 4)}${rand}`;
}
