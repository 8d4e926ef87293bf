/**
 * Slack's request signing (v0): `X-Slack-Signature` is `v0=` + hex HMAC-SHA256 of
 * `v0:<X-Slack-Request-Timestamp>:<raw body>` under the app's signing secret. A request whose
 * timestamp is more than 300 s off, or whose signature does not match (constant-time compare),
 * is refused. Hand-written on purpose (node:crypto, a dozen lines): `@slack/bolt`'s verifier
 * brings the whole Bolt framework into the ack bundle (README "Dependencies").
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** Slack's replay window (seconds). */
export const SLACK_SIGNATURE_MAX_AGE_SECONDS = 300;

export type SignatureVerdict = { ok: true } | { ok: false; reason: "missing" | "stale" | "mismatch" };

export function slackSignature(signingSecret: string, timestamp: string, rawBody: string): string {
  return `v0=${createHmac("sha256", signingSecret).update(`v0:${timestamp}:${rawBody}`).digest("hex")}`;
}

export function verifySlackSignature(input: {
  signingSecret: string;
  signature: string | undefined;
  timestamp: string | undefined;
  rawBody: string;
  nowSeconds: number;
}): SignatureVerdict {
  const { signature, timestamp } = input;
  if (!signature || !timestamp || !/^\d{1,12}$/.test(timestamp) || !input.signingSecret) return { ok: false, reason: "missing" };
  if (Math.abs(input.nowSeconds - Number(timestamp)) > SLACK_SIGNATURE_MAX_AGE_SECONDS) return { ok: false, reason: "stale" };
  const expected = Buffer.from(slackSignature(input.signingSecret, timestamp, input.rawBody), "utf8");
  const given = Buffer.from(signature, "utf8");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: "mismatch" };
  return { ok: true };
}
