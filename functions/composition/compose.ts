/**
 * The composition root: the one place that builds the stores and ports every runtime shares
 * (ARCHITECTURE.md §9). Each runtime builds its configuration and a small set of adapters (the
 * DynamoDB document client, push, scheduler, flow runner, providers, agent, keys, logger,
 * metrics) and calls `composeRuntime`; the Lambda entries (./aws.ts), the relay service, the
 * local runtime and the flow test harness all go through it, so a store or a dependency is
 * added here once. One document client per runtime: every store shares it.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Metrics } from "@aws-lambda-powertools/metrics";
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import type { Config } from "../config/config";
import { sessionKeyEpochs, type KeyEpochs, type SandboxKeyring } from "../config/sandbox-keyring";
import { newSessionId } from "../domain/ids";
import type { ProviderType } from "../domain/session";
import type { FlowDeps } from "../flows/flow-deps";
import type { HttpDeps } from "../http/http-handler";
import type { AgentClient } from "../ports/agent-client";
import type { ClientPush } from "../ports/client-push";
import type { FlowRunner } from "../ports/flow-runner";
import type { LifecycleScheduler } from "../ports/lifecycle-scheduler";
import type { MetricsSink } from "../ports/metrics-sink";
import type { RelayHandover, RelayNudge } from "../ports/relay";
import type { SandboxProvider } from "../ports/sandbox-provider";
import type { SecretKeyWrapper } from "../ports/secret-key-wrapper";
import type { RelayDeps } from "../relay/relay";
import { DynamoOrgSecretStore } from "../store/dynamo-org-secrets";
import { DynamoOrgSettingsStore } from "../store/dynamo-org-settings";
import { DynamoRelayLeaseStore } from "../store/dynamo-relay-store";
import { DynamoConnectionRegistry, DynamoLifecycleEventLog, DynamoPromptQueue, DynamoProxyConnectionRegistry } from "../store/dynamo-session-items";
import { DynamoApiTokenStore, DynamoSessionStore } from "../store/dynamo-session-store";
import { DynamoSessionSettingsStore } from "../store/dynamo-session-settings";
import { DynamoTranscriptStore } from "../store/dynamo-transcript";
import { DynamoWsTicketStore } from "../store/dynamo-ws-tickets";
import { DynamoSnapshotDeletionQueue } from "../store/dynamo-snapshot-deletions";
import type { WsDeps } from "../ws/ws-deps";
import type { BuildRunner } from "../ports/build-runner";
import { DynamoRepoCatalog } from "../store/dynamo-repo-catalog";
import { DynamoOrgUsageStore } from "../store/dynamo-org-usage";
import { measuredProviders } from "./measured-provider";

/** What differs between runtimes (AWS, local, tests); everything else is built from these. */
export interface RuntimeAdapters {
  /** The runtime's one DynamoDB document client (DynamoDB in AWS, dynalite locally). */
  doc: DynamoDBDocumentClient;
  logger: Logger;
  /** Powertools metrics: request metrics, flushed by `logMetrics` (locally disabled or ignored). */
  metrics: Metrics;
  /** Flow, idle and sweeper figures (CloudWatch EMF in AWS; in memory locally and in tests). */
  flowMetrics: MetricsSink;
  push: ClientPush;
  scheduler: LifecycleScheduler;
  flows: FlowRunner;
  provider: (type: ProviderType) => Promise<SandboxProvider>;
  agent: AgentClient;
  /** The keyring over the runtime's master sandbox key, reading each session's key epoch from `epochs`. */
  sandboxKeys: (epochs: KeyEpochs) => SandboxKeyring;
  /** Wraps each org secret's data key (KMS in AWS, a local master key otherwise). */
  secretKeys: SecretKeyWrapper;
  /** How a new WebSocket connection gets its `init` (see ws-deps.ts). */
  afterConnect: WsDeps["afterConnect"];
  now?: () => Date;
  newSessionId?: () => string;
  /** What the flows see of the relay leases (the flow harness pretends a relay watches); the store by default. */
  flowRelayLeases?: (store: DynamoRelayLeaseStore) => FlowDeps["relayLeases"];
  /** Starts the snapshot builder (API.md "Repositories and prebuilds"); a runtime that builds nothing may leave it out. */
  builds?: BuildRunner;
  /** How flows and the prompt path tell the relays a session changed: in process locally; nudge items (the AWS default) otherwise. */
  relayNudge?: RelayNudge;
  /** How a draining relay hands its sessions to its peers (AWS: the nudge queue; locally: the successor in process). */
  relayHandover?: RelayHandover;
}

export interface RuntimeStores {
  sessions: DynamoSessionStore;
  tokens: DynamoApiTokenStore;
  wsTickets: DynamoWsTicketStore;
  prompts: DynamoPromptQueue;
  events: DynamoLifecycleEventLog;
  connections: DynamoConnectionRegistry;
  proxies: DynamoProxyConnectionRegistry;
  transcript: DynamoTranscriptStore;
  relayLeases: DynamoRelayLeaseStore;
  secrets: DynamoOrgSecretStore;
  orgSettings: DynamoOrgSettingsStore;
  snapshotDeletions: DynamoSnapshotDeletionQueue;
  sessionSettings: DynamoSessionSettingsStore;
  catalog: DynamoRepoCatalog;
  usage: DynamoOrgUsageStore;
}

export interface Runtime {
  config: Config;
  doc: DynamoDBDocumentClient;
  logger: Logger;
  metrics: Metrics;
  stores: RuntimeStores;
  sandboxKeys: SandboxKeyring;
  /** Flow steps, schedule targets, the sweeper. */
  flowDeps: FlowDeps;
  /** HTTP routes. */
  httpDeps: HttpDeps;
  /** WebSocket routes and send-init. */
  wsDeps: WsDeps;
  /** The streaming relay. */
  relayDeps: RelayDeps;
}

/** A runtime without the builder: starting a build fails, naming what is missing. */
const noBuildRunner: BuildRunner = {
  start: () => Promise.reject(new Error("this runtime has no snapshot builder (STATE_MACHINE_ARN_SNAPSHOT_BUILDER is not set)")),
};

export function composeStores(doc: DynamoDBDocumentClient, tableName: string, secretKeys: SecretKeyWrapper, metrics?: MetricsSink): RuntimeStores {
  // Publishes ActiveSeconds (by org) for every second it records, at a close or in a pass.
  const usage = new DynamoOrgUsageStore(doc, tableName, metrics);
  return {
    // Every transition that ends a running interval meters its end (API.md "Usage, limits and credits").
    sessions: new DynamoSessionStore(doc, tableName, usage),
    tokens: new DynamoApiTokenStore(doc, tableName),
    wsTickets: new DynamoWsTicketStore(doc, tableName),
    prompts: new DynamoPromptQueue(doc, tableName, metrics),
    events: new DynamoLifecycleEventLog(doc, tableName),
    connections: new DynamoConnectionRegistry(doc, tableName),
    proxies: new DynamoProxyConnectionRegistry(doc, tableName),
    transcript: new DynamoTranscriptStore(doc, tableName),
    relayLeases: new DynamoRelayLeaseStore(doc, tableName),
    secrets: new DynamoOrgSecretStore(doc, tableName, secretKeys),
    orgSettings: new DynamoOrgSettingsStore(doc, tableName),
    snapshotDeletions: new DynamoSnapshotDeletionQueue(doc, tableName),
    sessionSettings: new DynamoSessionSettingsStore(doc, tableName),
    catalog: new DynamoRepoCatalog(doc, tableName),
    usage,
  };
}

export function composeRuntime(parsed: Config, adapters: RuntimeAdapters): Runtime {
  // Parsed once, never changed: a runtime that needs other values builds the config it needs.
  const config = Object.isFrozen(parsed) ? parsed : Object.freeze({ ...parsed });
  const stores = composeStores(adapters.doc, config.TABLE_NAME, adapters.secretKeys, adapters.flowMetrics);
  const sandboxKeys = adapters.sandboxKeys(sessionKeyEpochs(stores.sessions));
  const now = adapters.now ?? (() => new Date());
  // In AWS the nudge queue (composition/aws.ts), locally the relay in process; none where no relay listens.
  const relayNudge = adapters.relayNudge;
  // Every provider call timed and its errors counted (ProviderCallDuration / ProviderCallErrors).
  const provider = measuredProviders(adapters.provider, adapters.flowMetrics);
  const flowDeps: FlowDeps = {
    sessions: stores.sessions,
    prompts: stores.prompts,
    events: stores.events,
    connections: stores.connections,
    proxies: stores.proxies,
    relayLeases: adapters.flowRelayLeases ? adapters.flowRelayLeases(stores.relayLeases) : stores.relayLeases,
    relayNudge,
    push: adapters.push,
    scheduler: adapters.scheduler,
    flows: adapters.flows,
    provider,
    agent: adapters.agent,
    sandboxKeys,
    secrets: stores.secrets,
    orgSettings: stores.orgSettings,
    snapshotDeletions: stores.snapshotDeletions,
    config,
    metrics: adapters.flowMetrics,
    now,
    logger: adapters.logger,
    catalog: stores.catalog,
    usage: stores.usage,
  };
  const httpDeps: HttpDeps = {
    sessions: stores.sessions,
    tokens: stores.tokens,
    wsTickets: stores.wsTickets,
    prompts: stores.prompts,
    events: stores.events,
    transcript: stores.transcript,
    flows: adapters.flows,
    relayLeases: stores.relayLeases,
    relayNudge,
    proxies: stores.proxies,
    scheduler: adapters.scheduler,
    agent: adapters.agent,
    provider,
    sandboxKeys,
    secrets: stores.secrets,
    orgSettings: stores.orgSettings,
    sessionSettings: stores.sessionSettings,
    connections: stores.connections,
    push: adapters.push,
    config,
    now,
    newSessionId: adapters.newSessionId ?? newSessionId,
    logger: adapters.logger,
    metrics: adapters.metrics,
    catalog: stores.catalog,
    builds: adapters.builds ?? noBuildRunner,
    usage: stores.usage,
  };
  const wsDeps: WsDeps = {
    ...flowDeps,
    tokens: stores.tokens,
    wsTickets: stores.wsTickets,
    transcript: stores.transcript,
    afterConnect: adapters.afterConnect,
  };
  const relayDeps: RelayDeps = {
    sessions: stores.sessions,
    prompts: stores.prompts,
    flows: adapters.flows,
    agent: adapters.agent,
    sandboxKeys,
    connections: stores.connections,
    push: adapters.push,
    transcript: stores.transcript,
    relayLeases: stores.relayLeases,
    ...(adapters.relayHandover ? { handover: adapters.relayHandover } : {}),
    scheduler: adapters.scheduler,
    config,
    logger: adapters.logger,
    now,
    metrics: adapters.flowMetrics,
  };
  return { config, doc: adapters.doc, logger: adapters.logger, metrics: adapters.metrics, stores, sandboxKeys, flowDeps, httpDeps, wsDeps, relayDeps };
}
