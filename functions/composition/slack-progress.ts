/**
 * Slack progress alone (functions/slack/status-line.ts with its outbox, store and Web API client),
 * for the relay in AWS: a long-lived process that sees every translated agent event, so the status
 * line's once-a-second throttle holds there. Imports nothing of the worker or the HTTP routes.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { ClientPush } from "../ports/client-push";
import type { SessionStore } from "../ports/session-store";
import { SlackOutbox } from "../slack/outbox";
import { SlackProgress } from "../slack/status-line";
import type { DynamoDBDocumentClient } from "../store/dynamodb-sdk";
import { slackWebClient } from "./slack-web";
import { composeSlackStore } from "./slack-store";

/** `botToken` is read on the first post (so a relay starts without calling Secrets Manager). */
export function composeSlackProgress(input: { doc: DynamoDBDocumentClient; tableName: string; sessions: SessionStore; botToken: () => Promise<string | undefined>; apiUrl: string; logger: Logger; now: () => Date }): SlackProgress {
  const store = composeSlackStore(input.doc, input.tableName);
  const outbox = new SlackOutbox(async () => slackWebClient({ botToken: await input.botToken(), apiUrl: input.apiUrl, logger: input.logger }), store, input.now);
  return new SlackProgress({ store, sessions: input.sessions, outbox, logger: input.logger, now: input.now });
}

/** `push` that also shows every broadcast to `progress` (ClientPush `observe`). */
export function observedPush(push: ClientPush, progress: SlackProgress): ClientPush {
  return {
    send: (connectionId, message) => push.send(connectionId, message),
    disconnect: (connectionId) => push.disconnect(connectionId),
    observe: (sessionId, message) => progress.observe(sessionId, message),
  };
}
