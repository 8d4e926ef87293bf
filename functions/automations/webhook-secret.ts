/**
 * An automation's webhook secret (API.md "Automations": returned once, by the create), stored
 * envelope-encrypted as org secrets are (functions/secrets/envelope-cipher.ts: AES-256-GCM under a
 * fresh data key wrapped by the SecretKeyWrapper, KMS in AWS), bound to the context (org,
 * `automation-webhook/<id>`): an envelope copied to another automation's item does not open.
 * Opened only where it signs or verifies (the notification POST, the webhook trigger).
 */
import { randomBytes } from "node:crypto";
import type { SecretKeyWrapper } from "../ports/secret-key-wrapper";
import { openSecret, sealSecret, type SecretEnvelope } from "../secrets/envelope-cipher";

const context = (orgId: string, automationId: string) => ({ orgId, name: `automation-webhook/${automationId}` });

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

export function sealWebhookSecret(keys: SecretKeyWrapper, orgId: string, automationId: string, secret: string): Promise<SecretEnvelope> {
  return sealSecret(keys, secret, context(orgId, automationId));
}

export function openWebhookSecret(keys: SecretKeyWrapper, automation: { orgId: string; id: string; webhookSecret: SecretEnvelope }): Promise<string> {
  return openSecret(keys, automation.webhookSecret, context(automation.orgId, automation.id));
}
