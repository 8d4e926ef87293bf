/**
 * Sandbox credentials (seed 003 §7 "sandbox-mcp auth", seed 004 "Auth Gateway": HMAC-signed,
 * short-lived tokens carrying the session id and an expiry). Two layers:
 *
 * - the **sandbox key**: derived from the control plane's master key, per session and per key
 *   epoch (`HMAC-SHA256(master, "sandbox-key/v2/" + sessionId + "/" + epoch)`; epoch 0, a session
 *   stored before epochs existed, keeps `"sandbox-key/v1/" + sessionId`). The session's
 *   `sandboxKeyEpoch` moves on with every freshly booted sandbox (issue 14 §2), so a leaked key
 *   dies with its sandbox; a sandbox that resumes its processes (memory snapshot, paused
 *   sandbox) keeps its epoch. Derivation, not storage: nothing stores a key. It reaches the
 *   sandbox as a file for its boot, which hands it to the sidecar alone
 *   (sandbox/shared/sandbox-key-file.ts). Only the control plane and the sidecar ever hold it;
 * - **access tokens**: `sca1.<claims>.<signature>`, minted by the control plane for a user who
 *   may use the session, signed with the sandbox key, valid for minutes. The sidecar checks
 *   them with the key it already has, so no call back to the control plane is needed;
 * - the **agent password**: OpenCode's HTTP basic auth password (`OPENCODE_SERVER_PASSWORD`),
 *   `base64url(HMAC-SHA256(sandboxKey, "opencode-password/v1"))`. The boot derives it from
 *   `SIDECAR_TOKEN` for OpenCode alone; the control plane derives it from the same key to call
 *   the agent through its (otherwise public) tunnel. One-way: OpenCode, and so the agent's
 *   shell, holds the password but cannot recover the sandbox key from it.
 *
 * Shared by the control plane (functions/) and the sidecar (sandbox/), which ships alone in the
 * image: this file imports nothing but node:crypto.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const ACCESS_TOKEN_PREFIX = "sca1";
/**
 * The name the sandbox key goes by: the create call's `envVars` entry the providers take it from,
 * and the sidecar's credential. Never an env var inside a sandbox the boot started: the key
 * travels as a file the boot reads and removes, then on the sidecar's stdin (`SANDBOX_KEY_FILE_ENV`).
 */
export const SANDBOX_KEY_ENV = "SIDECAR_TOKEN";
/** The sidecar reads its key from this file (`-`: its stdin, how the boot hands it over). */
export const SANDBOX_KEY_FILE_ENV = "SIDECAR_TOKEN_FILE";
/** OpenCode's basic auth user name (its default for `OPENCODE_SERVER_USERNAME`). */
export const AGENT_USERNAME = "opencode";
/** The env var OpenCode (1.18) reads its basic auth password from. */
export const AGENT_PASSWORD_ENV = "OPENCODE_SERVER_PASSWORD";
/** An access token never lives longer than this, whatever its claims say. */
export const MAX_ACCESS_TOKEN_LIFETIME_SECONDS = 24 * 60 * 60;

export interface AccessClaims {
  /** The session the token opens. */
  sid: string;
  /** Issued at, epoch seconds. */
  iat: number;
  /** Expires at, epoch seconds. */
  exp: number;
}

export type AccessVerdict = { ok: true; claims: AccessClaims } | { ok: false; reason: "malformed" | "signature" | "session" | "expired" | "lifetime" };

const b64url = (buf: Buffer): string => buf.toString("base64url");

/** The sandbox key of a session at a key epoch (the sidecar's credential); epoch 0 is the v1 key. */
export function deriveSandboxKey(masterKey: string, sessionId: string, epoch = 0): string {
  if (masterKey.length < 32) throw new Error("the sandbox access master key must be at least 32 characters");
  if (!Number.isInteger(epoch) || epoch < 0) throw new Error(`invalid sandbox key epoch ${String(epoch)}`);
  const label = epoch === 0 ? `sandbox-key/v1/${sessionId}` : `sandbox-key/v2/${sessionId}/${epoch}`;
  return b64url(createHmac("sha256", masterKey).update(label, "utf8").digest());
}

/** OpenCode's server password in a sandbox whose sandbox key is `sandboxKey`. */
export function deriveAgentPassword(sandboxKey: string): string {
  if (sandboxKey === "") throw new Error("the sandbox key is empty");
  return b64url(createHmac("sha256", sandboxKey).update("opencode-password/v1", "utf8").digest());
}

/** The `Authorization` header value OpenCode accepts for `password`. */
export function agentAuthorization(password: string): string {
  return `Basic ${Buffer.from(`${AGENT_USERNAME}:${password}`, "utf8").toString("base64")}`;
}

function sign(sandboxKey: string, signed: string): Buffer {
  return createHmac("sha256", sandboxKey).update(signed, "utf8").digest();
}

export function mintAccessToken(sandboxKey: string, claims: AccessClaims): string {
  const payload = b64url(Buffer.from(JSON.stringify({ sid: claims.sid, iat: claims.iat, exp: claims.exp }), "utf8"));
  const signed = `${ACCESS_TOKEN_PREFIX}.${payload}`;
  return `${signed}.${b64url(sign(sandboxKey, signed))}`;
}

export function looksLikeAccessToken(token: string): boolean {
  return token.startsWith(`${ACCESS_TOKEN_PREFIX}.`);
}

function parseClaims(payload: string): AccessClaims | null {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null) return null;
  const { sid, iat, exp } = value as Record<string, unknown>;
  if (typeof sid !== "string" || sid === "" || !Number.isInteger(iat) || !Number.isInteger(exp)) return null;
  return { sid, iat: iat as number, exp: exp as number };
}

/**
 * The session an access token claims, read WITHOUT checking its signature: only to pick the key
 * to verify it with (the control plane derives one key per session). Never trust it before
 * `verifyAccessToken` passes with that key.
 */
export function claimedSessionId(token: string): string | null {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== ACCESS_TOKEN_PREFIX || !parts[1]) return null;
  return parseClaims(parts[1])?.sid ?? null;
}

/**
 * Checks an access token against this sandbox's key and session at `nowSeconds`. The signature
 * is compared in constant time before the claims are trusted.
 */
export function verifyAccessToken(token: string, sandboxKey: string, expected: { sessionId: string; nowSeconds: number }): AccessVerdict {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== ACCESS_TOKEN_PREFIX || !parts[1] || !parts[2]) return { ok: false, reason: "malformed" };
  const [prefix, payload, signature] = parts as [string, string, string];
  const presented = Buffer.from(signature, "base64url");
  const wanted = sign(sandboxKey, `${prefix}.${payload}`);
  if (presented.length !== wanted.length || !timingSafeEqual(presented, wanted)) return { ok: false, reason: "signature" };
  const claims = parseClaims(payload);
  if (!claims) return { ok: false, reason: "malformed" };
  if (claims.sid !== expected.sessionId) return { ok: false, reason: "session" };
  if (claims.exp - claims.iat > MAX_ACCESS_TOKEN_LIFETIME_SECONDS) return { ok: false, reason: "lifetime" };
  if (claims.exp <= expected.nowSeconds) return { ok: false, reason: "expired" };
  return { ok: true, claims };
}
