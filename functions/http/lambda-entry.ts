/**
 * Lambda entry points: the dependencies are built once per container (cold start) from the
 * parsed configuration, never per request. The local runtime does not use this: it passes its
 * own dependencies (dynalite endpoint) to the same `make…Handler` functions.
 */
import type { Context, APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { loadConfig } from "../config/config";
import { newSessionId } from "../domain/ids";
import { logger } from "../observability/logger";
import { metrics } from "../observability/metrics";
import { createDocumentClient } from "../store/dynamo-client";
import { DynamoOrgSettingsStore } from "../store/dynamo-org-settings";
import { DynamoApiTokenStore, DynamoSessionStore } from "../store/dynamo-session-store";
import { DynamoLifecycleEventLog, DynamoPromptQueue, DynamoProxyConnectionRegistry } from "../store/dynamo-session-items";
import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { lifecycleSchedulerFromEnv } from "../adapters/aws/eventbridge-lifecycle-scheduler";
import { DynamoTranscriptStore } from "../store/dynamo-transcript";
import { DynamoRelayLeaseStore } from "../store/dynamo-relay-store";
import { SFNClient } from "@aws-sdk/client-sfn";
import { SfnFlowRunner, stateMachineArnsFromEnv } from "../adapters/aws/sfn-flow-runner";
import { OpenCodeAgentClient } from "../agent/opencode-agent-client";
import { noProviders, type ProviderBinding } from "../flows/lambda-entry";
import { keyringFromEnv, sessionKeyEpochs } from "../config/sandbox-keyring";
import { DynamoOrgSecretStore } from "../store/dynamo-org-secrets";
import { DynamoWsTicketStore } from "../store/dynamo-ws-tickets";
import { kmsKeyWrapperFromEnv } from "../secrets/kms-key-wrapper";
import type { HttpDeps, HttpHandler } from "./http-handler";

let deps: HttpDeps | undefined;

export function awsHttpDeps(providers: ProviderBinding = noProviders): HttpDeps {
  if (!deps) {
    const config = loadConfig();
    const doc = createDocumentClient(config.DYNAMODB_ENDPOINT ? { endpoint: config.DYNAMODB_ENDPOINT } : {});
    const sessions = new DynamoSessionStore(doc, config.TABLE_NAME);
    deps = {
      sessions,
      tokens: new DynamoApiTokenStore(doc, config.TABLE_NAME),
      wsTickets: new DynamoWsTicketStore(doc, config.TABLE_NAME),
      prompts: new DynamoPromptQueue(doc, config.TABLE_NAME),
      events: new DynamoLifecycleEventLog(doc, config.TABLE_NAME),
      transcript: new DynamoTranscriptStore(doc, config.TABLE_NAME),
      relayLeases: new DynamoRelayLeaseStore(doc, config.TABLE_NAME),
      proxies: new DynamoProxyConnectionRegistry(doc, config.TABLE_NAME),
      scheduler: lifecycleSchedulerFromEnv(process.env, () => new SchedulerClient({})),
      flows: new SfnFlowRunner(new SFNClient({}), stateMachineArnsFromEnv(process.env)),
      agent: new OpenCodeAgentClient(),
      provider: providers(config),
      sandboxKeys: keyringFromEnv(process.env, undefined, sessionKeyEpochs(sessions)),
      // KMS only on first wrap/unwrap: functions that read metadata never need SECRETS_KMS_KEY_ARN.
      secrets: new DynamoOrgSecretStore(doc, config.TABLE_NAME, kmsKeyWrapperFromEnv(process.env)),
      orgSettings: new DynamoOrgSettingsStore(doc, config.TABLE_NAME),
      config,
      now: () => new Date(),
      newSessionId,
      logger,
      metrics,
    };
  }
  return deps;
}

/** `providers`: `awsProviders` for a route that calls a sandbox provider; none otherwise (a smaller bundle). */
export function lambdaEntry(make: (deps: HttpDeps) => HttpHandler, providers: ProviderBinding = noProviders): HttpHandler {
  let handler: HttpHandler | undefined;
  return (event: APIGatewayProxyEventV2, context: Context): Promise<APIGatewayProxyStructuredResultV2> => {
    handler ??= make(awsHttpDeps(providers));
    return handler(event, context);
  };
}
