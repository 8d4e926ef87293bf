/**
 * Lambda entry of the Slack ack function (POST /slack/commands, /slack/events,
 * /slack/interactions; infra/slack-stack.ts): verify, record, enqueue to SQS, answer. It loads
 * the store, the ack handler and, on first use, the Secrets Manager and SQS clients (the AWS SDK
 * comes from the Lambda runtime): no middy, no Powertools, no route table, so a cold start stays
 * far under Slack's 3 s (`npm run bench`, section "slack").
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { processEnvironment } from "../config/environment";
import { slackSecrets, SqsSlackQueue } from "../composition/slack-aws";
import { composeSlackStore } from "../composition/slack-store";
import { createDocumentClient } from "../store/dynamo-client";
import { makeSlackAckHandler, type SlackRoute } from "./ack";
import { SLACK_ACK_ROUTES } from "./routes";

type Handler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

const log = (level: "INFO" | "ERROR", message: string, fields: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ level, message, service: "slack-ack", ...fields })}\n`);

let handlers: Map<string, Handler> | undefined;

function build(): Map<string, Handler> {
  const env = processEnvironment();
  const tableName = env.TABLE_NAME;
  const queueUrl = env.SLACK_QUEUE_URL;
  if (!tableName || !queueUrl) throw new Error("invalid configuration: TABLE_NAME and SLACK_QUEUE_URL are required");
  const deps = {
    signingSecret: async () => (await slackSecrets(env)).signingSecret,
    store: composeSlackStore(createDocumentClient(), tableName),
    queue: new SqsSlackQueue(queueUrl),
    now: () => new Date(),
    log: (message: string, fields: Record<string, unknown>) => log("INFO", message, fields),
  };
  return new Map(SLACK_ACK_ROUTES.map((r) => [`${r.method} ${r.path}`, makeSlackAckHandler(r.route as SlackRoute, deps)]));
}

export const handler = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
  handlers ??= build();
  const route = handlers.get(event.routeKey);
  if (!route) return { statusCode: 404, headers: { "content-type": "application/json" }, body: JSON.stringify({ error: { code: "not_found", message: `no route ${event.routeKey}` } }) };
  try {
    return await route(event);
  } catch (err) {
    // Slack retries a 5xx; the delivery was forgotten, so the retry is taken.
    log("ERROR", "slack ack failed", { route: event.routeKey, error: err instanceof Error ? err.name : "unknown" });
    return { statusCode: 500, headers: { "content-type": "application/json" }, body: JSON.stringify({ error: { code: "internal_error", message: "internal error" } }) };
  }
};
