/**
 * Revokes an API token and closes the WebSocket connections it opened (issue 14 item 5):
 *
 *   npm run token:revoke -- --table <TableName output> [--ws-endpoint <management URL>] <tok_id | id prefix | token>
 *
 * The token is named by its id (`tok_...`, printed by token:create), a unique prefix of the id (at
 * least 8 hex characters), or the token itself. From then on it is a 401 on every route and on
 * WebSocket connect. `--ws-endpoint` is the WebSocket API's management endpoint (the stack's
 * `WebSocketUrl` output with `https://` for `wss://`): its open connections are closed at once
 * (`DeleteConnection`). Without it they are marked revoked and closed at their next frame.
 *
 * Uses the AWS CLI's credentials and region; `DYNAMODB_ENDPOINT` points it at dynalite instead.
 */
import { parseArgs } from "node:util";
import { ApiGatewayManagementApiClient } from "@aws-sdk/client-apigatewaymanagementapi";
import { ApiGatewayClientPush } from "../functions/adapters/aws/apigw-client-push";
import { revokeApiToken } from "../functions/api-tokens/revoke-api-token";
import { createDocumentClient } from "../functions/store/dynamo-client";
import { DynamoApiTokenStore } from "../functions/store/dynamo-session-store";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    table: { type: "string" },
    "ws-endpoint": { type: "string" },
  },
});

async function main(): Promise<void> {
  if (!values.table) throw new Error("missing --table");
  if (positionals.length !== 1 || !positionals[0]) throw new Error("name one token: its id (tok_...), a prefix of the id, or the token");
  const wsEndpoint = values["ws-endpoint"]?.replace(/^wss:/, "https:").replace(/^ws:/, "http:");
  const endpoint = process.env.DYNAMODB_ENDPOINT;
  const doc = createDocumentClient(endpoint ? { endpoint } : {});
  const management = wsEndpoint ? new ApiGatewayManagementApiClient({ endpoint: wsEndpoint }) : null;
  try {
    const report = await revokeApiToken(
      { tokens: new DynamoApiTokenStore(doc, values.table), push: management ? new ApiGatewayClientPush(() => management) : null },
      positionals[0],
      new Date(),
    );
    const { token } = report;
    console.log(`revoked ${token.tokenId} (user ${token.userId}, org ${token.orgId}) at ${token.revokedAt ?? "?"}`);
    console.log(
      `websocket connections: ${report.closed.length} closed, ${report.gone.length} already gone` +
        (report.marked.length ? `, ${report.marked.length} marked (closed at their next frame; pass --ws-endpoint to close them now)` : ""),
    );
  } finally {
    management?.destroy();
    doc.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(`revoke-api-token: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
