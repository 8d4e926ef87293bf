/**
 * Automations (API.md "Automations"; ARCHITECTURE.md §9): the definition and run records, the
 * request bodies, and the rules that decide (pure: no clock reads, no I/O):
 * - the skip rule: a scheduled firing while the previous run is `starting` or `running` is `skipped`;
 * - auto-disable: after AUTO_DISABLE_AFTER consecutive `failed` / `timed_out` runs;
 * - a run's id: deterministic per (automation, trigger, scheduled time) for schedule firings, so a
 *   firing delivered twice writes the same run item (the conditional put decides: one run).
 */
import { createHash } from "node:crypto";
import * as z from "zod";
import { ProviderType, type RepoSpec } from "../domain/session";
import { refineMultiLine, refineSingleLine } from "../domain/text";
import type { SecretEnvelope } from "../secrets/envelope-cipher";

export const RUN_TRIGGERS = ["schedule", "manual", "webhook"] as const;
export type RunTrigger = (typeof RUN_TRIGGERS)[number];
export const RUN_STATUSES = ["starting", "running", "succeeded", "failed", "timed_out", "skipped"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export type RunEnd = "succeeded" | "failed" | "timed_out";

/** Issue 18: three consecutive failed / timed_out runs disable the automation. */
export const AUTO_DISABLE_AFTER = 3;
/** API.md: `maxRunSeconds` default. */
export const DEFAULT_MAX_RUN_SECONDS = 3600;
/** The run's summary: the start of the agent's final text. */
export const SUMMARY_CHARS = 280;

export const NotifySpec = z
  .object({
    /** A Slack channel id (C..., G...), posted through the Slack outbox. */
    slackChannel: z.string().regex(/^[CGD][A-Z0-9]{2,30}$/, "must be a Slack channel id (C..., G... or D...)").optional(),
    /** HTTPS (http only to loopback, for tests): the run as JSON, signed `X-Signature: sha256=<hmac>`. */
    webhookUrl: z
      .url()
      .max(2048)
      .refine((u) => u.startsWith("https://") || /^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?\//.test(u), "must be an https:// URL")
      .optional(),
  })
  .strict();
export type NotifySpec = z.infer<typeof NotifySpec>;

/** The fields a create or patch may set; the repos and prompt are checked by the session's own rules (automation-routes.ts). */
const definitionFields = {
  name: z.string().trim().min(1).max(200).superRefine(refineSingleLine),
  schedule: z.string().trim().min(1).max(256),
  timezone: z.string().min(1).max(64),
  repos: z.array(z.record(z.string(), z.unknown())).max(10),
  prompt: z.string().min(1).max(32_000).superRefine(refineMultiLine),
  enabled: z.boolean(),
  provider: ProviderType,
  maxRunSeconds: z.number().int().min(60).max(86_400),
  notify: NotifySpec.nullable(),
};

export const CreateAutomationBody = z
  .object({
    ...definitionFields,
    timezone: definitionFields.timezone.default("UTC"),
    enabled: definitionFields.enabled.default(true),
    provider: definitionFields.provider.optional(),
    maxRunSeconds: definitionFields.maxRunSeconds.default(DEFAULT_MAX_RUN_SECONDS),
    notify: definitionFields.notify.optional(),
  })
  .strict();
export type CreateAutomationBody = z.infer<typeof CreateAutomationBody>;

export const PatchAutomationBody = z
  .object({
    name: definitionFields.name.optional(),
    schedule: definitionFields.schedule.optional(),
    timezone: definitionFields.timezone.optional(),
    repos: definitionFields.repos.optional(),
    prompt: definitionFields.prompt.optional(),
    enabled: definitionFields.enabled.optional(),
    provider: definitionFields.provider.nullable().optional(),
    maxRunSeconds: definitionFields.maxRunSeconds.optional(),
    notify: definitionFields.notify.optional(),
  })
  .strict()
  .refine((b) => Object.keys(b).length > 0, "nothing to change");
export type PatchAutomationBody = z.infer<typeof PatchAutomationBody>;

export interface ActiveRun {
  runId: string;
  scheduledAt: string;
}

export interface AutomationRecord {
  id: string;
  orgId: string;
  /** Who created it: runs act as this user (member role) in its org. */
  userId: string;
  name: string;
  schedule: string;
  timezone: string;
  repos: RepoSpec[] | Record<string, unknown>[];
  prompt: string;
  enabled: boolean;
  disabledReason: string | null;
  provider: ProviderType | null;
  maxRunSeconds: number;
  notify: NotifySpec | null;
  /** HMAC key of the outbound notification and the inbound webhook trigger; returned once, by the create; stored envelope-encrypted (webhook-secret.ts). */
  webhookSecret: SecretEnvelope;
  /** When the schedule was set (a rate counts from here, as EventBridge's does). */
  scheduleAnchor: string;
  consecutiveFailures: number;
  activeRun: ActiveRun | null;
  lastRunAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface RunRecord {
  id: string;
  automationId: string;
  orgId: string;
  trigger: RunTrigger;
  status: RunStatus;
  scheduledAt: string;
  startedAt: string;
  endedAt: string | null;
  sessionId: string | null;
  summary: string | null;
  error: string | null;
}

/** What the agent reads in its sandbox (`.proliferate/trigger-context.json`, seed 003) and what maps a session back to its run. */
export interface AutomationTriggerContext {
  automationId: string;
  automationName: string;
  runId: string;
  trigger: RunTrigger;
  scheduledAt: string;
  /** A webhook trigger's request body. */
  payload?: unknown;
}

export const TriggerContextRef = z.looseObject({ automationId: z.string().min(1), runId: z.string().min(1), scheduledAt: z.iso.datetime() });

export function automationView(a: AutomationRecord, nextRunAt: Date | null) {
  return {
    id: a.id,
    name: a.name,
    schedule: a.schedule,
    timezone: a.timezone,
    repos: a.repos,
    prompt: a.prompt,
    enabled: a.enabled,
    disabledReason: a.disabledReason,
    provider: a.provider,
    maxRunSeconds: a.maxRunSeconds,
    notify: a.notify ?? {},
    consecutiveFailures: a.consecutiveFailures,
    lastRunAt: a.lastRunAt,
    nextRunAt: a.enabled && nextRunAt ? nextRunAt.toISOString() : null,
    createdAt: a.createdAt,
    updatedAt: a.updatedAt,
  };
}

export function runView(r: RunRecord) {
  return {
    id: r.id,
    automationId: r.automationId,
    trigger: r.trigger,
    status: r.status,
    scheduledAt: r.scheduledAt,
    startedAt: r.startedAt,
    endedAt: r.endedAt,
    sessionId: r.sessionId,
    ...(r.summary !== null ? { summary: r.summary } : {}),
    ...(r.error !== null ? { error: r.error } : {}),
  };
}

/** A schedule firing's run id: the same firing delivered twice is the same run. */
export function firingRunId(automationId: string, trigger: RunTrigger, key: string): string {
  return `run_${createHash("sha256").update(`${automationId}\n${trigger}\n${key}`).digest("hex").slice(0, 24)}`;
}

/** The skip rule (API.md): the previous run still `starting` or `running`. */
export function isRunActive(status: RunStatus | undefined): boolean {
  return status === "starting" || status === "running";
}

/** After a run ends: the new failure streak and whether the automation is now disabled. */
export function afterRunEnd(consecutiveFailures: number, end: RunEnd): { consecutiveFailures: number; disable: boolean } {
  const streak = end === "succeeded" ? 0 : consecutiveFailures + 1;
  return { consecutiveFailures: streak, disable: streak >= AUTO_DISABLE_AFTER };
}

export function disabledReasonAfterFailures(streak: number): string {
  return `disabled after ${streak} consecutive failed or timed out runs`;
}

/** The run's summary from the agent's final text. */
export function summaryOf(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > SUMMARY_CHARS ? `${trimmed.slice(0, SUMMARY_CHARS)}…` : trimmed;
}
