/**
 * Slack in the local runtime (API.md "Slack"): the same ack handlers on `/slack/*` (signing
 * secret SLACK_SIGNING_SECRET), the workspace routes, an in-process queue in place of SQS, the
 * worker, and the progress tap fed by every broadcast (ClientPush `observe`).
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Config } from "../../functions/config/config";
import { composeSlack, InProcessSlackQueue, type SlackParts } from "../../functions/composition/slack";
import type { HttpDeps } from "../../functions/http/http-handler";
import type { SessionStore } from "../../functions/ports/session-store";
import { makeSlackAckHandler } from "../../functions/slack/ack";
import { SLACK_ACK_ROUTES, SLACK_WORKSPACE_ROUTES } from "../../functions/slack/routes";
import { makeDeleteSlackWorkspaceHandler, makeGetSlackWorkspaceHandler, makePutSlackWorkspaceHandler } from "../../functions/slack/workspace-routes";
import type { DynamoDBDocumentClient } from "../../functions/store/dynamodb-sdk";
import type { LocalExtraRoute } from "./local-http-server";
import type { HttpHandler } from "../../functions/http/http-handler";

export interface LocalSlack extends SlackParts {
  queue: InProcessSlackQueue;
  routes: LocalExtraRoute[];
  /** Every delivery handled and every progress post sent (tests). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export function localSlack(input: { config: Config; doc: DynamoDBDocumentClient; http: HttpDeps; sessions: SessionStore; logger: Logger; now: () => Date }): LocalSlack {
  const { config, logger } = input;
  const parts = composeSlack({ doc: input.doc, tableName: config.TABLE_NAME, http: input.http, sessions: input.sessions, botToken: config.SLACK_BOT_TOKEN, apiUrl: config.SLACK_API_URL, logger, now: input.now });
  const queue = new InProcessSlackQueue(() => parts.worker, logger);
  const secret = config.SLACK_SIGNING_SECRET ?? "";
  const ackDeps = { signingSecret: () => Promise.resolve(secret), store: parts.store, queue, now: input.now, log: (message: string, fields: Record<string, unknown>) => logger.info(message, fields) };
  const workspace = { PutSlackWorkspace: makePutSlackWorkspaceHandler, GetSlackWorkspace: makeGetSlackWorkspaceHandler, DeleteSlackWorkspace: makeDeleteSlackWorkspaceHandler };
  const routes: LocalExtraRoute[] = [
    ...SLACK_ACK_ROUTES.map((r) => ({ route: r, handler: makeSlackAckHandler(r.route, ackDeps) as unknown as HttpHandler })),
    ...SLACK_WORKSPACE_ROUTES.map((r) => ({ route: r, handler: workspace[r.id](parts.store)(input.http) })),
  ];
  return {
    ...parts,
    queue,
    routes,
    settled: async () => {
      await queue.settled();
      await parts.progress.settled();
    },
    close: async () => {
      await queue.settled().catch(() => undefined);
      parts.progress.close();
    },
  };
}
