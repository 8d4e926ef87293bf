/**
 * Run notifications (API.md "Automations" `notify`): each finished run is posted to the
 * automation's Slack channel through the Slack outbox (functions/slack/outbox.ts: one post per
 * run key, never twice) and/or POSTed as JSON to its `webhookUrl`, signed
 * `X-Signature: sha256=<hex HMAC-SHA256 of the raw body>` with the automation's webhook secret
 * (returned once, by the create). Retried with backoff (WEBHOOK_BACKOFF_MS) on a network error,
 * a 429 or a 5xx; never awaited by the run's completion, and failures are logged only (the URL
 * and the body are never logged: they may carry tokens). A Lambda whose invocation ended runs
 * (automation-fired, the routes, RecordFailure) awaits them before returning
 * (settle-notifications.ts): a frozen function would lose the POST and its retries.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { createHmac } from "node:crypto";
import { errorForLog } from "../observability/logger";
import type { SecretKeyWrapper } from "../ports/secret-key-wrapper";
import type { SlackOutbox } from "../slack/outbox";
import { runView, type AutomationRecord, type RunRecord } from "./automation";
import type { RunNotifier } from "./automation-runs";
import { openWebhookSecret } from "./webhook-secret";

/** Waits before each retry of a webhook POST (then it gives up). */
export const WEBHOOK_BACKOFF_MS = [1_000, 2_000, 5_000, 10_000];
const WEBHOOK_TIMEOUT_MS = 10_000;

export function webhookSignature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

export interface RunNotifierOptions {
  /** Absent: no Slack configured here (a `slackChannel` is logged as not posted). */
  slack?: () => Promise<SlackOutbox | null>;
  logger: Logger;
  /** Opens the automation's sealed webhook secret. */
  secretKeys: SecretKeyWrapper;
  fetch?: typeof fetch;
  backoffMs?: readonly number[];
  sleep?: (ms: number) => Promise<void>;
}

export class HttpRunNotifier implements RunNotifier {
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly options: RunNotifierOptions) {}

  notify(automation: AutomationRecord, run: RunRecord): void {
    const notify = automation.notify;
    if (!notify) return;
    const jobs: Promise<void>[] = [];
    if (notify.webhookUrl) jobs.push(this.postWebhook(notify.webhookUrl, automation, run));
    if (notify.slackChannel) jobs.push(this.postSlack(notify.slackChannel, automation, run));
    for (const job of jobs) {
      const p = job
        .catch((err: unknown) => this.options.logger.warn("automation notification failed", { automationId: automation.id, runId: run.id, error: errorForLog(err) }))
        .finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    }
  }

  /** Every notification sent or given up (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async postWebhook(url: string, automation: AutomationRecord, run: RunRecord): Promise<void> {
    const body = JSON.stringify({ type: "automation.run.finished", automation: { id: automation.id, name: automation.name }, run: runView(run) });
    const headers = { "content-type": "application/json", "x-signature": webhookSignature(await openWebhookSecret(this.options.secretKeys, automation), body), "x-automation-run": run.id };
    const doFetch = this.options.fetch ?? fetch;
    const backoff = this.options.backoffMs ?? WEBHOOK_BACKOFF_MS;
    const sleep = this.options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    for (let attempt = 0; ; attempt++) {
      let retryable: boolean;
      let problem: string;
      try {
        const res = await doFetch(url, { method: "POST", headers, body, signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS) });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) return;
        retryable = res.status === 429 || res.status >= 500;
        problem = `HTTP ${res.status}`;
      } catch (err) {
        retryable = true;
        problem = (err as Error).name;
      }
      const wait = backoff[attempt];
      if (!retryable || wait === undefined) throw new Error(`webhook notification not delivered after ${attempt + 1} attempts (${problem})`);
      await sleep(wait);
    }
  }

  private async postSlack(channel: string, automation: AutomationRecord, run: RunRecord): Promise<void> {
    const outbox = this.options.slack ? await this.options.slack() : null;
    if (!outbox) {
      this.options.logger.warn("automation notification: no Slack configured here", { automationId: automation.id, runId: run.id });
      return;
    }
    const icon = run.status === "succeeded" ? "✅" : run.status === "timed_out" ? "⏱️" : "❌";
    const detail = run.summary ?? run.error ?? "";
    const text = `${icon} Automation *${automation.name}* run ${run.status}${detail ? `: ${detail}` : ""}`.slice(0, 3000);
    await outbox.post(`automation:${automation.id}:${run.id}`, { channel, text });
  }
}
