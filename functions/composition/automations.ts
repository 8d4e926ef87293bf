/**
 * Automations composed (API.md "Automations"): the store, the run dependencies (the ordinary
 * session routes called in process, functions/slack/session-api.ts), the notifier and the
 * route handlers; the scheduler is the caller's (EventBridge in AWS, timers locally).
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { AutomationParts } from "../automations/automation-routes";
import type { AutomationRunDeps } from "../automations/automation-runs";
import { HttpRunNotifier } from "../automations/run-notifier";
import type { HttpDeps } from "../http/http-handler";
import type { AutomationScheduler } from "../ports/automations";
import type { MetricsSink } from "../ports/metrics-sink";
import type { PromptQueue } from "../ports/session-items";
import type { SessionStore } from "../ports/session-store";
import type { TranscriptStore } from "../ports/transcript";
import type { SecretKeyWrapper } from "../ports/secret-key-wrapper";
import type { SlackOutbox } from "../slack/outbox";
import { SlackSessionApi } from "../slack/session-api";
import { DynamoAutomationStore } from "../store/dynamo-automation-store";
import type { DynamoDBDocumentClient } from "../store/dynamodb-sdk";

export interface AutomationComposition extends AutomationParts {
  notifier: HttpRunNotifier;
  /** The table's automations (also `scanEnabled`, for the local runtime's timers after a restart). */
  store: DynamoAutomationStore;
}

export function composeAutomations(input: {
  doc: DynamoDBDocumentClient;
  tableName: string;
  scheduler: AutomationScheduler;
  sessions: SessionStore;
  prompts: PromptQueue;
  transcript: TranscriptStore;
  metrics: MetricsSink;
  logger: Logger;
  now: () => Date;
  slack?: () => Promise<SlackOutbox | null>;
  /** Seals and opens the automations' webhook secrets (KMS in AWS). */
  secretKeys: SecretKeyWrapper;
  /** The webhook notification's waits before each retry (default WEBHOOK_BACKOFF_MS). */
  webhookBackoffMs?: readonly number[];
}): AutomationComposition {
  const store = new DynamoAutomationStore(input.doc, input.tableName);
  const notifier = new HttpRunNotifier({ logger: input.logger, secretKeys: input.secretKeys, ...(input.slack ? { slack: input.slack } : {}), ...(input.webhookBackoffMs ? { backoffMs: input.webhookBackoffMs } : {}) });
  const base: Omit<AutomationRunDeps, "api"> = {
    store,
    scheduler: input.scheduler,
    sessions: input.sessions,
    prompts: input.prompts,
    transcript: input.transcript,
    metrics: input.metrics,
    notifier,
    logger: input.logger,
    now: input.now,
  };
  const apis = new WeakMap<HttpDeps, SlackSessionApi>();
  const runDeps = (http: HttpDeps): AutomationRunDeps => {
    let api = apis.get(http);
    if (!api) apis.set(http, (api = new SlackSessionApi(http)));
    return { ...base, api };
  };
  return { ...base, store, notifier, runDeps, secretKeys: input.secretKeys };
}
