/**
 * Everything a flow step may touch, passed in (STYLE.md 1). The Lambda entry builds the AWS
 * adapters once per container; the local runtime passes dynalite, timers, its WebSocket push
 * and the local provider to the same step functions.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Config } from "../config/config";
import type { ProviderType } from "../domain/session";
import type { AgentClient } from "../ports/agent-client";
import type { ClientPush } from "../ports/client-push";
import type { FlowRunner } from "../ports/flow-runner";
import type { LifecycleScheduler } from "../ports/lifecycle-scheduler";
import type { SandboxProvider } from "../ports/sandbox-provider";
import type { ConnectionRegistry, LifecycleEventLog, PromptQueue } from "../ports/session-items";
import type { RelayLeaseStore } from "../ports/relay";
import type { SessionStore } from "../ports/session-store";

export interface FlowDeps {
  sessions: SessionStore;
  prompts: PromptQueue;
  events: LifecycleEventLog;
  connections: ConnectionRegistry;
  /** Whether a relay watches a session (prompt delivery waits for one). */
  relayLeases: Pick<RelayLeaseStore, "watched">;
  push: ClientPush;
  scheduler: LifecycleScheduler;
  flows: FlowRunner;
  provider: (type: ProviderType) => Promise<SandboxProvider>;
  agent: AgentClient;
  config: Config;
  now: () => Date;
  logger: Logger;
}
