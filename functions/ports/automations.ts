/**
 * Automation ports (API.md "Automations"): the definitions and runs in the single table, and the
 * schedules that fire them.
 * AutomationScheduler, AWS: one EventBridge Scheduler schedule per automation in the
 * `<stack>-automations` group (its own cron/rate, `ScheduleExpressionTimezone`, flexible window
 * off) plus a one-time `at()` timeout schedule per run; locally: timers (croner for cron) calling
 * the same `automation-fired` handler.
 */
import * as z from "zod";
import type { AutomationRecord, RunEnd, RunRecord } from "../automations/automation";

/** The run an inbound webhook's idempotency key is bound to. */
export interface WebhookKeyRun {
  runId: string;
  scheduledAt: string;
}

export interface AutomationStore {
  /** A conditional put: false when the id exists. */
  create(record: AutomationRecord): Promise<boolean>;
  get(orgId: string, id: string, consistent?: boolean): Promise<AutomationRecord | null>;
  list(orgId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: AutomationRecord[]; nextCursor: string | null }>;
  /** Replaces the definition's fields (`fields`), guarded by `updatedAt` (a concurrent change is a null). */
  update(orgId: string, id: string, fields: Partial<AutomationRecord>, expectedUpdatedAt: string): Promise<AutomationRecord | null>;
  delete(orgId: string, id: string): Promise<void>;
  /** The firing's run, written once (`attribute_not_exists`): false for a second delivery of the same firing. */
  putRun(run: RunRecord): Promise<boolean>;
  getRun(automationId: string, scheduledAt: string, runId: string): Promise<RunRecord | null>;
  /** Moves a run from `starting` to `running` with its session. */
  runStarted(run: RunRecord, sessionId: string): Promise<boolean>;
  /** Ends a `starting` or `running` run: false when it had already ended (the first end wins). */
  endRun(run: Pick<RunRecord, "automationId" | "scheduledAt" | "id">, end: RunEnd, at: Date, detail: { summary?: string; error?: string }): Promise<RunRecord | null>;
  /** Newest first. */
  listRuns(automationId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: RunRecord[]; nextCursor: string | null }>;
  /** The automation's current run (null clears it when it is still `runId`). */
  setActiveRun(orgId: string, automationId: string, active: { runId: string; scheduledAt: string } | null, expectRunId?: string): Promise<void>;
  /** The failure streak after a run ended; disables at the threshold. Returns the record after. */
  recordRunEnd(orgId: string, automationId: string, end: RunEnd, at: Date): Promise<AutomationRecord | null>;
  /**
   * An inbound webhook's idempotency key, claimed once (7 days) for the run it is to start (its
   * id and scheduled time, so a retry reads that run directly). Not fresh: claimed already, by `run`.
   */
  claimWebhookKey(automationId: string, key: string, run: WebhookKeyRun, at: Date): Promise<{ fresh: boolean; run: WebhookKeyRun }>;
  /** The run a claimed key started (null: not claimed, or released). */
  getWebhookKey(automationId: string, key: string): Promise<WebhookKeyRun | null>;
  /** Gives up a claim that started no run (still held by `runId` only). */
  releaseWebhookKey(automationId: string, key: string, runId: string): Promise<void>;
}

/**
 * Told by the flow's own failure path (the `record-failure` step, the same code locally and in
 * AWS) when an automation run's session could not be started (its status now `error`): the run
 * ends `failed` there and then (functions/automations/automation-runs.ts `sessionFailed`).
 */
export interface AutomationRunSignals {
  sessionFailed(sessionId: string, message: string): Promise<void>;
}

/** What a schedule delivers to `automation-fired`. */
export const AutomationFiredEvent = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("fire"), orgId: z.string().min(1), automationId: z.string().min(1), scheduledAt: z.iso.datetime().optional() }),
  z.object({ kind: z.literal("timeout"), orgId: z.string().min(1), automationId: z.string().min(1), runId: z.string().min(1), scheduledAt: z.iso.datetime() }),
]);
export type AutomationFiredEvent = z.infer<typeof AutomationFiredEvent>;

export interface AutomationScheduler {
  /** Creates or replaces the automation's recurring schedule (enabled or disabled as the record says). */
  put(automation: AutomationRecord): Promise<void>;
  /** Deletes it; unknown is a no-op. */
  remove(automation: Pick<AutomationRecord, "id" | "orgId">): Promise<void>;
  /** The run's one-time timeout at `at`. */
  armTimeout(run: Pick<RunRecord, "id" | "automationId" | "orgId" | "scheduledAt">, at: Date): Promise<void>;
  cancelTimeout(run: Pick<RunRecord, "id">): Promise<void>;
}

/** Schedule names: within EventBridge's 64 characters. */
export const automationScheduleName = (automationId: string) => `automation-${automationId}`.slice(0, 64);
export const runTimeoutScheduleName = (runId: string) => `run-timeout-${runId}`.slice(0, 64);
