/**
 * Issues an API token for a user in an org: prints the token once and stores only its SHA-256.
 *
 *   npm run token:create -- --table <TableName output> --org acme --user alice [--name laptop] [--role admin|member]
 *
 * The role (API.md "Roles") defaults to member; admin routes (PUT/DELETE /v1/secrets/...) need admin.
 *
 * Uses the AWS CLI's credentials and region; `DYNAMODB_ENDPOINT` points it at dynalite instead.
 */
import { parseArgs } from "node:util";
import { newApiToken } from "../functions/domain/ids";
import { ROLES } from "../functions/domain/principal";
import { createDocumentClient } from "../functions/store/dynamo-client";
import { DynamoApiTokenStore } from "../functions/store/dynamo-session-store";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const { values } = parseArgs({
  options: {
    table: { type: "string" },
    org: { type: "string" },
    user: { type: "string" },
    name: { type: "string" },
    role: { type: "string", default: "member" },
  },
});

async function main(): Promise<void> {
  const missing = (["table", "org", "user"] as const).filter((k) => !values[k]);
  if (missing.length) throw new Error(`missing ${missing.map((m) => `--${m}`).join(", ")}`);
  const role = ROLES.find((r) => r === values.role);
  if (!role) throw new Error(`--role must be one of ${ROLES.join(", ")}`);
  const endpoint = process.env.DYNAMODB_ENDPOINT;
  const doc = createDocumentClient(endpoint ? { endpoint } : {});
  const token = newApiToken();
  await new DynamoApiTokenStore(doc, String(values.table)).putToken(
    token,
    { orgId: String(values.org), userId: String(values.user), role, ...(values.name ? { name: values.name } : {}) },
    new Date(),
  );
  doc.destroy();
  console.log(token);
}

main().catch((err: unknown) => {
  console.error(`create-api-token: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
