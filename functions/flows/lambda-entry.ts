/**
 * Lambda entry for flow steps and schedule targets: AWS adapters built once per container from
 * the configuration (cold start), never per invocation. The local runtime does not use this:
 * it passes its own dependencies to the same step factories.
 */
import { SFNClient } from "@aws-sdk/client-sfn";
import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { ApiGatewayManagementApiClient } from "@aws-sdk/client-apigatewaymanagementapi";
import { loadConfig, type Config } from "../config/config";
import { providerEnvironment } from "../config/provider-secrets";
import { keyringFromEnv } from "../config/sandbox-keyring";
import { DynamoOrgSecretStore } from "../store/dynamo-org-secrets";
import { kmsKeyWrapperFromEnv } from "../secrets/kms-key-wrapper";
import { logger } from "../observability/logger";
import { createDocumentClient } from "../store/dynamo-client";
import { DynamoOrgSettingsStore } from "../store/dynamo-org-settings";
import { DynamoSessionStore } from "../store/dynamo-session-store";
import { DynamoConnectionRegistry, DynamoLifecycleEventLog, DynamoPromptQueue, DynamoProxyConnectionRegistry } from "../store/dynamo-session-items";
import { EmfMetricsSink } from "../observability/emf-metrics-sink";
import { DynamoRelayLeaseStore } from "../store/dynamo-relay-store";
import { SfnFlowRunner, stateMachineArnsFromEnv } from "../adapters/aws/sfn-flow-runner";
import { EventBridgeLifecycleScheduler } from "../adapters/aws/eventbridge-lifecycle-scheduler";
import { ApiGatewayClientPush } from "../adapters/aws/apigw-client-push";
import { OpenCodeAgentClient } from "../agent/opencode-agent-client";
import { createSandboxProvider } from "../providers/provider-factory";
import type { ProviderType } from "../domain/session";
import type { SandboxProvider } from "../ports/sandbox-provider";
import type { ClientPush } from "../ports/client-push";
import type { FlowDeps } from "./flow-deps";

let deps: FlowDeps | undefined;

/** Providers built on first use from the provider secret; a failed build is retried by the next call. */
export function awsProviders(config: Config): (type: ProviderType) => Promise<SandboxProvider> {
  const providers = new Map<ProviderType, Promise<SandboxProvider>>();
  return (type) => {
    let p = providers.get(type);
    if (!p) {
      p = providerEnvironment().then((env) => createSandboxProvider(type, { sandboxTimeoutSeconds: config.SANDBOX_TIMEOUT_SECONDS, env, ...(config.LOCAL_SANDBOX_DIR ? { localDataDir: config.LOCAL_SANDBOX_DIR } : {}) }));
      p.catch(() => providers.delete(type));
      providers.set(type, p);
    }
    return p;
  };
}

/** Without a WebSocket API (WS_URL unset) there is nobody to push to. */
const noPush: ClientPush = { send: () => Promise.resolve("gone") };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`invalid configuration: ${name} is not set`);
  return value;
}

export function awsFlowDeps(): FlowDeps {
  if (!deps) {
    const config = loadConfig();
    const doc = createDocumentClient(config.DYNAMODB_ENDPOINT ? { endpoint: config.DYNAMODB_ENDPOINT } : {});
    const managementEndpoint = process.env.WS_MANAGEMENT_ENDPOINT;
    deps = {
      sessions: new DynamoSessionStore(doc, config.TABLE_NAME),
      prompts: new DynamoPromptQueue(doc, config.TABLE_NAME),
      events: new DynamoLifecycleEventLog(doc, config.TABLE_NAME),
      connections: new DynamoConnectionRegistry(doc, config.TABLE_NAME),
      proxies: new DynamoProxyConnectionRegistry(doc, config.TABLE_NAME),
      relayLeases: new DynamoRelayLeaseStore(doc, config.TABLE_NAME),
      push: managementEndpoint ? new ApiGatewayClientPush(new ApiGatewayManagementApiClient({ endpoint: managementEndpoint })) : noPush,
      scheduler: new EventBridgeLifecycleScheduler({
        client: new SchedulerClient({}),
        groupName: required("SCHEDULE_GROUP_NAME"),
        targetArn: required("SCHEDULE_TARGET_ARN"),
        roleArn: required("SCHEDULE_ROLE_ARN"),
      }),
      flows: new SfnFlowRunner(new SFNClient({}), stateMachineArnsFromEnv(process.env)),
      provider: awsProviders(config),
      agent: new OpenCodeAgentClient(),
      sandboxKeys: keyringFromEnv(process.env),
      // KMS only on first wrap/unwrap: functions that read metadata never need SECRETS_KMS_KEY_ARN.
      secrets: new DynamoOrgSecretStore(doc, config.TABLE_NAME, kmsKeyWrapperFromEnv(process.env)),
      orgSettings: new DynamoOrgSettingsStore(doc, config.TABLE_NAME),
      config,
      metrics: new EmfMetricsSink(),
      now: () => new Date(),
      logger,
    };
  }
  return deps;
}

/** The Lambda handler for a step: dependencies on first invocation, then the step itself. */
export function stepEntry<R = unknown>(make: (deps: FlowDeps) => (event: unknown) => Promise<R>): (event: unknown) => Promise<R> {
  let handler: ((event: unknown) => Promise<R>) | undefined;
  return (event) => {
    handler ??= make(awsFlowDeps());
    return handler(event);
  };
}
