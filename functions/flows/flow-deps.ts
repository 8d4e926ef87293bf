/**
 * Everything a flow step may touch, passed in (STYLE.md 1). The Lambda entry builds the AWS
 * adapters once per container; the local runtime passes dynalite, timers, its WebSocket push
 * and the local provider to the same step functions.
 */
import type { SandboxKeyring } from "../config/sandbox-keyring";
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Config } from "../config/config";
import type { ProviderType } from "../domain/session";
import type { AgentClient } from "../ports/agent-client";
import type { ClientPush } from "../ports/client-push";
import type { FlowRunner } from "../ports/flow-runner";
import type { OrgSecretStore } from "../ports/org-secrets";
import type { OrgSettingsStore } from "../ports/org-settings";
import type { LifecycleScheduler } from "../ports/lifecycle-scheduler";
import type { SandboxProvider } from "../ports/sandbox-provider";
import type { MetricsSink } from "../ports/metrics-sink";
import type { ConnectionRegistry, LifecycleEventLog, PromptQueue, ProxyConnectionRegistry } from "../ports/session-items";
import type { RelayLeaseStore, RelayNudge } from "../ports/relay";
import type { SessionStore } from "../ports/session-store";
import type { SnapshotDeletionQueue } from "../ports/snapshot-deletions";
import type { RepoCatalog } from "../ports/repo-catalog";
import type { OrgUsageStore } from "../ports/org-usage";
import type { AutomationRunSignals } from "../ports/automations";

export interface FlowDeps {
  sessions: SessionStore;
  prompts: PromptQueue;
  events: LifecycleEventLog;
  connections: ConnectionRegistry;
  /** Terminal / editor proxy connections (seed 002 constraint 8). */
  proxies: ProxyConnectionRegistry;
  /**
   * Whether a relay watches a session (prompt delivery waits for one; the idle predicate's "SSE
   * ready"), and the relay lease an idle snapshot takes away from the relay while it works.
   */
  relayLeases: Pick<RelayLeaseStore, "watched" | "seize" | "release">;
  /** Tells the relays a session changed (issue 15): a committed flow, so a resume is watched at once. */
  relayNudge?: RelayNudge;
  push: ClientPush;
  scheduler: LifecycleScheduler;
  flows: FlowRunner;
  provider: (type: ProviderType) => Promise<SandboxProvider>;
  agent: AgentClient;
  /** Sandbox keys: provision injects the session's key into its sandbox as SIDECAR_TOKEN. */
  sandboxKeys: SandboxKeyring;
  /** The org's secrets: provision reveals the model keys and git credentials a session names. */
  secrets: OrgSecretStore;
  /** The org's default model, read by provision when the session names none. */
  orgSettings: Pick<OrgSettingsStore, "getModel">;
  /** Snapshot deletes that failed, retried by the sweeper (issue 22 §4). */
  snapshotDeletions: SnapshotDeletionQueue;
  config: Config;
  metrics: MetricsSink;
  now: () => Date;
  logger: Logger;
  /** Repositories, prebuilds and builds: provision resolves their snapshot layers; the builder's steps record builds. */
  catalog: RepoCatalog;
  /** Usage metering and the org's limits: `ensure-runtime` admits a session to run by them; the metering pass writes usage. */
  usage: OrgUsageStore;
  /** Automations (issue 18): `record-failure` ends an automation session's run `failed`. Absent: no automations here. */
  automationRuns?: AutomationRunSignals;
}
