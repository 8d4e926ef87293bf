/**
 * Automations in AWS: the container's runtime (functions/composition/lambda.ts, or the relay's)
 * plus the EventBridge Scheduler adapter from the environment infra/automations-stack.ts sets
 * (AUTOMATIONS_SCHEDULE_GROUP, AUTOMATION_FIRED_ARN, AUTOMATIONS_SCHEDULER_ROLE_ARN) and, when
 * SLACK_SECRET_ARN is set, the Slack outbox for `notify.slackChannel` (the bot token read on
 * the first post).
 */
import { automationSchedulerFromEnv } from "../adapters/aws/eventbridge-automation-scheduler";
import { schedulerClient } from "../adapters/aws/eventbridge-lifecycle-scheduler";
import { kmsKeyWrapperFromEnv } from "../secrets/kms-key-wrapper";
import { SlackOutbox } from "../slack/outbox";
import { composeAutomations, type AutomationComposition } from "./automations";
import type { Runtime } from "./compose";
import { slackSecrets } from "./slack-aws";
import { composeSlackStore } from "./slack-store";
import { slackWebClient } from "./slack-web";

export function composeAwsAutomations(rt: Pick<Runtime, "doc" | "config" | "stores" | "logger" | "flowDeps">, env: Readonly<Record<string, string | undefined>>): AutomationComposition {
  const now = () => new Date();
  const outbox = env.SLACK_SECRET_ARN
    ? new SlackOutbox(
        async () => slackWebClient({ botToken: (await slackSecrets(env)).botToken, apiUrl: rt.config.SLACK_API_URL, logger: rt.logger }),
        composeSlackStore(rt.doc, rt.config.TABLE_NAME),
        now,
      )
    : null;
  return composeAutomations({
    doc: rt.doc,
    tableName: rt.config.TABLE_NAME,
    scheduler: automationSchedulerFromEnv(env, schedulerClient),
    sessions: rt.stores.sessions,
    prompts: rt.stores.prompts,
    transcript: rt.stores.transcript,
    metrics: rt.flowDeps.metrics,
    logger: rt.logger,
    now,
    slack: () => Promise.resolve(outbox),
    // The webhook secrets, envelope-encrypted under the org secrets' KMS key (SECRETS_KMS_KEY_ARN).
    secretKeys: kmsKeyWrapperFromEnv(env),
  });
}
