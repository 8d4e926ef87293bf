/**
 * The AWS adapters every AWS process shares (the Lambdas and the relay task): DynamoDB, Step
 * Functions, EventBridge Scheduler, the API Gateway management API, the agent client, the sandbox
 * keys (Secrets Manager), EMF metrics. The Lambdas add their own in ./lambda.ts. Every SDK client
 * but DynamoDB's is built, and its SDK loaded, on its adapter's first call
 * (functions/adapters/aws/sdk-client.ts): none of them weighs on a cold start.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { ApiGatewayClientPush, apiGatewayManagementClient } from "../adapters/aws/apigw-client-push";
import { lifecycleSchedulerFromEnv, schedulerClient } from "../adapters/aws/eventbridge-lifecycle-scheduler";
import { SfnFlowRunner, sfnClient, stateMachineArnsFromEnv } from "../adapters/aws/sfn-flow-runner";
import { BUILD_STATE_MACHINE_ARN_ENV, SfnBuildRunner } from "../adapters/aws/sfn-build-runner";
import { RELAY_NUDGE_QUEUE_URL_ENV, SqsRelayNudge, sqsClient } from "../adapters/aws/sqs-relay-nudge";
import { OpenCodeAgentClient } from "../agent/opencode-agent-client";
import type { Config } from "../config/config";
import { keyringFromEnv } from "../config/sandbox-keyring";
import { EmfMetricsSink } from "../observability/emf-metrics-sink";
import { createLogger } from "../observability/logger";
import { createMetrics } from "../observability/metrics";
import type { ClientPush } from "../ports/client-push";
import { slackForwardingPush } from "../slack/status-forward";
import { SqsSlackQueue } from "./slack-aws";
import { createDocumentClient } from "../store/dynamo-client";
import { composeRuntime, type Runtime, type RuntimeAdapters } from "./compose";

/** Without a WebSocket API (no management endpoint) there is nobody to push to. */
export const noPush: ClientPush = { send: () => Promise.resolve("gone"), disconnect: () => Promise.resolve("gone") };

/**
 * What only some AWS processes have: the Lambdas build the providers, the KMS key wrapper and the
 * send-init invocation (./lambda.ts); the relay needs none of them (and its image bundles none).
 */
export interface AwsProcessAdapters {
  provider: RuntimeAdapters["provider"];
  secretKeys: RuntimeAdapters["secretKeys"];
  afterConnect: RuntimeAdapters["afterConnect"];
  logger?: Logger;
}

/** The relay nudge queue's URL, when this process nudges or receives nudges. */
export function nudgeQueueUrl(env: Readonly<Record<string, string | undefined>>): string | undefined {
  return env[RELAY_NUDGE_QUEUE_URL_ENV]?.trim() || undefined;
}

/** The AWS runtime for a configuration and environment: the relay's as is; ./lambda.ts builds the Lambdas' on it. */
export function composeAwsRuntime(config: Config, env: Readonly<Record<string, string | undefined>>, adapters: AwsProcessAdapters): Runtime {
  const doc = createDocumentClient(config.DYNAMODB_ENDPOINT ? { endpoint: config.DYNAMODB_ENDPOINT } : {});
  const wsManagementEndpoint = config.WS_MANAGEMENT_ENDPOINT;
  const metrics = createMetrics({ namespace: config.POWERTOOLS_METRICS_NAMESPACE, serviceName: config.POWERTOOLS_SERVICE_NAME });
  const logger = adapters.logger ?? createLogger(config.POWERTOOLS_SERVICE_NAME);
  const push = wsManagementEndpoint ? new ApiGatewayClientPush(() => apiGatewayManagementClient(wsManagementEndpoint)) : noPush;
  const queueUrl = nudgeQueueUrl(env);
  const nudges = queueUrl ? new SqsRelayNudge(sqsClient, queueUrl) : null;
  return composeRuntime(config, {
    doc,
    logger,
    metrics,
    flowMetrics: new EmfMetricsSink(metrics),
    // The flow steps that broadcast statuses have SLACK_QUEUE_URL (infra): Slack hears their statuses.
    push: config.SLACK_QUEUE_URL ? slackForwardingPush(push, new SqsSlackQueue(config.SLACK_QUEUE_URL), { logger, now: () => new Date() }) : push,
    scheduler: lifecycleSchedulerFromEnv(env, schedulerClient),
    flows: new SfnFlowRunner(sfnClient, stateMachineArnsFromEnv(env)),
    builds: new SfnBuildRunner(sfnClient, env[BUILD_STATE_MACHINE_ARN_ENV]?.trim() || undefined),
    // Flows and the prompt path nudge the relays through their queue (issue 15); the relay receives from it (relay/service.ts)
    // and, draining, hands its sessions over through it.
    ...(nudges ? { relayNudge: nudges, relayHandover: nudges } : {}),
    provider: adapters.provider,
    agent: new OpenCodeAgentClient(),
    sandboxKeys: (epochs) => keyringFromEnv(env, undefined, epochs),
    secretKeys: adapters.secretKeys,
    afterConnect: adapters.afterConnect,
  });
}

