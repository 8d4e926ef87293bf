/**
 * Slack's composition (API.md "Slack"): its store, the Web API client (`@slack/web-api`, base URL
 * SLACK_API_URL), the worker, the progress tap and the ack handlers, from a runtime's parts. The
 * local runtime and the Lambda entries build Slack from here, so neither builds a store itself.
 */
import type { WebClient } from "@slack/web-api";
import type { Logger } from "@aws-lambda-powertools/logger";
import type { HttpDeps } from "../http/http-handler";
import type { SessionStore } from "../ports/session-store";
import type { SlackQueue, SlackStore } from "../ports/slack";

import type { DynamoDBDocumentClient } from "../store/dynamodb-sdk";
import { composeSlackStore } from "./slack-store";
import { slackWebClient } from "./slack-web";

export { slackWebClient };
import { SlackWorker } from "../slack/worker";
import type { SlackProgress } from "../slack/status-line";

export { composeSlackStore };

export interface SlackParts {
  store: SlackStore;
  web: WebClient;
  worker: SlackWorker;
  progress: SlackProgress;
}

export function composeSlack(input: { doc: DynamoDBDocumentClient; tableName: string; http: HttpDeps; sessions: SessionStore; botToken: string | undefined; apiUrl: string; logger: Logger; now: () => Date; minUpdateMs?: number }): SlackParts {
  const store = composeSlackStore(input.doc, input.tableName);
  const web = slackWebClient({ botToken: input.botToken, apiUrl: input.apiUrl, logger: input.logger });
  const worker = new SlackWorker({ http: input.http, store, web, logger: input.logger, now: input.now, ...(input.minUpdateMs !== undefined ? { minUpdateMs: input.minUpdateMs } : {}) });
  // One status line per session in the process: the worker's (forwarded statuses) is the tap's too.
  return { store, web, worker, progress: worker.progress };
}

/**
 * The local runtime's queue: the worker runs in process; a failed delivery is handed to it again
 * (what SQS does after the visibility timeout), up to `attempts` times.
 */
export class InProcessSlackQueue implements SlackQueue {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly worker: () => SlackWorker,
    private readonly logger: Logger,
    private readonly attempts = 3,
  ) {}

  enqueue(delivery: Parameters<SlackQueue["enqueue"]>[0]): Promise<void> {
    const run = (async () => {
      for (let attempt = 1; attempt <= this.attempts; attempt++) {
        try {
          await this.worker().handle(delivery);
          return;
        } catch (err) {
          this.logger.warn("slack delivery failed", { key: delivery.key, attempt, error: err instanceof Error ? err.message : String(err) });
        }
      }
      this.logger.error("slack delivery dropped after retries (the dead-letter queue in AWS)", { key: delivery.key });
    })();
    this.pending.add(run);
    void run.finally(() => this.pending.delete(run));
    return Promise.resolve();
  }

  /** Resolves once every delivery enqueued so far is handled. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
