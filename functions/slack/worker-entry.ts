/**
 * Lambda entry of the Slack worker (infra/slack-stack.ts): the SQS event source hands it the
 * ack function's deliveries; each is handled by the worker (worker.ts) over the container's
 * runtime. A delivery that throws is reported in `batchItemFailures`: SQS redelivers it after the
 * visibility timeout and moves it to the dead-letter queue after `maxReceiveCount` tries.
 */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { awsRuntime } from "../composition/lambda";
import { composeSlack } from "../composition/slack";
import { slackSecrets } from "../composition/slack-aws";
import { processEnvironment } from "../config/config";
import { errorForLog } from "../observability/logger";
import type { SlackDelivery } from "../ports/slack";
import type { SlackWorker } from "./worker";

let worker: Promise<SlackWorker> | undefined;

async function build(): Promise<SlackWorker> {
  const rt = awsRuntime();
  const secrets = await slackSecrets(processEnvironment());
  const now = () => new Date();
  return composeSlack({ doc: rt.doc, tableName: rt.config.TABLE_NAME, http: rt.httpDeps, sessions: rt.stores.sessions, botToken: secrets.botToken, apiUrl: rt.config.SLACK_API_URL, logger: rt.logger, now }).worker;
}

export const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
  worker ??= build().catch((err: unknown) => {
    worker = undefined;
    throw err;
  });
  const ready = await worker;
  const failures: SQSBatchResponse["batchItemFailures"] = [];
  for (const record of event.Records) {
    try {
      await ready.handle(JSON.parse(record.body) as SlackDelivery);
    } catch (err) {
      awsRuntime().logger.error("slack delivery failed", { messageId: record.messageId, error: errorForLog(err) });
      failures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures: failures };
};
