/** The Slack store alone (the ack function and the workspace routes need nothing else of Slack's). */
import type { SlackStore } from "../ports/slack";
import { DynamoSlackStore } from "../store/dynamo-slack-store";
import type { DynamoDBDocumentClient } from "../store/dynamodb-sdk";

export function composeSlackStore(doc: DynamoDBDocumentClient, tableName: string): SlackStore {
  return new DynamoSlackStore(doc, tableName);
}
