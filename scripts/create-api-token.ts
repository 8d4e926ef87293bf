/**
 * Issues an API token for a user in an org: prints the token once and stores only its SHA-256.
 *
 *   npm run token:create -- --table <TableName output> --org acme --user alice [--name laptop] [--role admin|member]
 *                           [--expires-in 90d | 12h | 30m | <days>] [--expires-at 2027-01-31T00:00:00Z]
 *
 * The role (API.md "Roles") defaults to member; admin routes (PUT/DELETE /v1/secrets/...) need admin.
 * Without an expiry flag the token never expires (revoke it with `npm run token:revoke`).
 * The token goes to stdout alone; its id (`tok_...`, what `token:revoke` takes) and expiry to stderr.
 *
 * Uses the AWS CLI's credentials and region; `DYNAMODB_ENDPOINT` points it at dynalite instead.
 */
import { parseArgs } from "node:util";
import { parseTokenExpiry } from "../functions/api-tokens/token-expiry";
import { newApiToken } from "../functions/domain/ids";
import { ROLES } from "../functions/domain/principal";
import { createDocumentClient } from "../functions/store/dynamo-client";
import { apiTokenId, DynamoApiTokenStore, hashToken } from "../functions/store/dynamo-session-store";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const { values } = parseArgs({
  options: {
    table: { type: "string" },
    org: { type: "string" },
    user: { type: "string" },
    name: { type: "string" },
    role: { type: "string", default: "member" },
    "expires-in": { type: "string" },
    "expires-at": { type: "string" },
  },
});

async function main(): Promise<void> {
  const missing = (["table", "org", "user"] as const).filter((k) => !values[k]);
  if (missing.length) throw new Error(`missing ${missing.map((m) => `--${m}`).join(", ")}`);
  const role = ROLES.find((r) => r === values.role);
  if (!role) throw new Error(`--role must be one of ${ROLES.join(", ")}`);
  const now = new Date();
  const expiresAt = parseTokenExpiry({ expiresIn: values["expires-in"], expiresAt: values["expires-at"] }, now);
  const endpoint = process.env.DYNAMODB_ENDPOINT;
  const doc = createDocumentClient(endpoint ? { endpoint } : {});
  const token = newApiToken();
  await new DynamoApiTokenStore(doc, String(values.table)).putToken(
    token,
    { orgId: String(values.org), userId: String(values.user), role, ...(values.name ? { name: values.name } : {}) },
    now,
    expiresAt ? { expiresAt } : {},
  );
  doc.destroy();
  console.log(token);
  console.error(`token id ${apiTokenId(hashToken(token))}, ${expiresAt ? `expires ${expiresAt.toISOString()}` : "never expires"}`);
}

main().catch((err: unknown) => {
  console.error(`create-api-token: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
