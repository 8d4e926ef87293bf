/**
 * Automation runs (API.md "Automations"; ARCHITECTURE.md §9). One implementation, called by:
 * - `automation-fired` (the Lambda behind the automation's EventBridge Scheduler schedule and
 *   its runs' one-time timeout schedules; locally the timers of LocalAutomationScheduler):
 *   `fire` and `timeOut`;
 * - the run-now and webhook routes: `startRun` with trigger `manual` / `webhook`;
 * - the relay, where a turn completes (`completeTurn`'s `turnSettled`): `turnSettled`;
 * - the flow's failure path (`record-failure`, when a run's session ends in `error`): `sessionFailed`.
 *
 * A firing: (1) the firing is recorded once: the run item's id derives from (automation,
 * scheduled time) and its put is conditional, so a firing delivered twice is one run; (2) the
 * skip rule: the previous run still `starting`/`running` (after reconciling it with its session:
 * a session in `error` or `stopped` ends it `failed`) makes this firing `skipped`; (3) the run's
 * session is created through the ordinary `POST /v1/sessions` handler (clientType
 * `automation`, the automation's repos, prompt as `initialPrompt`, the trigger context) and
 * started through `POST /v1/sessions/{id}/resume`: the same validation, quotas and credit checks
 * as any client (402 `credits_exhausted` ends the run `failed`); (4) a one-time timeout schedule
 * at `maxRunSeconds`. The run ends once (a conditional write: the first of turn completion,
 * session error and timeout wins), then the failure streak is counted (3 in a row disables the
 * automation and its schedule), the timeout is deleted, a timed-out run's session is stopped, and
 * the notifications go out without being awaited by the run.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { randomBytes } from "node:crypto";
import type { Principal } from "../domain/principal";
import { errorForLog } from "../observability/logger";
import type { AutomationFiredEvent, AutomationScheduler, AutomationStore } from "../ports/automations";
import { METRIC_NAMES, type MetricName, type MetricsSink } from "../ports/metrics-sink";
import type { PromptQueue } from "../ports/session-items";
import type { SessionStore } from "../ports/session-store";
import type { TranscriptStore } from "../ports/transcript";
import type { ApiAnswer } from "../slack/session-api";
import {
  TriggerContextRef,
  afterRunEnd,
  firingRunId,
  isRunActive,
  summaryOf,
  type AutomationRecord,
  type AutomationTriggerContext,
  type RunEnd,
  type RunRecord,
  type RunTrigger,
} from "./automation";

/** Metric names (functions/ports/metrics-sink.ts). */
export const AUTOMATION_METRICS = { runs: METRIC_NAMES.automationRuns, firingLag: METRIC_NAMES.automationFiringLag } as const;

/** The ordinary HTTP route handlers, called in process (functions/slack/session-api.ts). */
export interface SessionRouteCaller {
  call(principal: Principal, routeId: string, input: { path: string; body?: unknown; params?: Record<string, string> }): Promise<ApiAnswer>;
}

/** Where a finished run is announced (functions/automations/run-notifier.ts). */
export interface RunNotifier {
  notify(automation: AutomationRecord, run: RunRecord): void;
}

export interface AutomationRunDeps {
  store: AutomationStore;
  scheduler: AutomationScheduler;
  api: SessionRouteCaller;
  sessions: Pick<SessionStore, "getSession">;
  prompts: Pick<PromptQueue, "list" | "listOpen">;
  transcript: Pick<TranscriptStore, "list">;
  metrics: MetricsSink;
  notifier: RunNotifier;
  logger: Logger;
  now: () => Date;
}

export type FireOutcome = "started" | "failed" | "skipped" | "duplicate" | "disabled" | "unknown";

function putMetric(deps: AutomationRunDeps, name: MetricName, value: number, unit: "Count" | "Milliseconds", dimensions?: Record<string, string>): void {
  deps.metrics.put(name, value, unit, dimensions);
}

/** Runs act as the automation's creator, as a member of its org. */
export function automationPrincipal(a: AutomationRecord): Principal {
  return { orgId: a.orgId, userId: a.userId, role: "member" };
}

function describeAnswer(answer: ApiAnswer, what: string): string {
  return `${what}: ${answer.status} ${answer.code ?? "error"}${answer.message ? `: ${answer.message}` : ""}`;
}

/** A schedule (or timeout) firing: the body of `automation-fired`. */
export async function handleAutomationFired(deps: AutomationRunDeps, event: AutomationFiredEvent): Promise<{ outcome: FireOutcome | "timed_out" | "ended"; run?: RunRecord }> {
  if (event.kind === "timeout") return timeOut(deps, event);
  const automation = await deps.store.get(event.orgId, event.automationId, true);
  if (!automation) {
    deps.logger.warn("automation fired for an unknown automation (deleted?)", { automationId: event.automationId });
    return { outcome: "unknown" };
  }
  if (!automation.enabled) return { outcome: "disabled" };
  const now = deps.now();
  const scheduledAt = event.scheduledAt ? new Date(event.scheduledAt) : now;
  putMetric(deps, AUTOMATION_METRICS.firingLag, Math.max(0, now.getTime() - scheduledAt.getTime()), "Milliseconds");
  return startRun(deps, automation, { trigger: "schedule", scheduledAt: scheduledAt.toISOString(), runId: firingRunId(automation.id, "schedule", scheduledAt.toISOString()) });
}

/**
 * The automation's current run, reconciled with its session: a session that errored or was
 * stopped without the run ending (its end was missed) ends the run `failed` now.
 */
export async function currentRun(deps: AutomationRunDeps, automation: AutomationRecord): Promise<RunRecord | null> {
  if (!automation.activeRun) return null;
  const run = await deps.store.getRun(automation.id, automation.activeRun.scheduledAt, automation.activeRun.runId);
  if (!run || !isRunActive(run.status)) return null;
  if (run.sessionId) {
    const session = await deps.sessions.getSession(run.sessionId);
    if (session && (session.status === "error" || session.status === "stopped")) {
      await endRun(deps, run, "failed", { error: session.status === "error" ? `session error: ${session.errorMessage ?? "unknown"}` : "the session was stopped" });
      return null;
    }
  }
  return run;
}

/**
 * Starts a run: records it once, applies the skip rule (scheduled firings), creates and starts
 * its session. Returns the run as recorded (an existing one for a duplicate firing).
 */
export async function startRun(
  deps: AutomationRunDeps,
  automation: AutomationRecord,
  input: { trigger: RunTrigger; scheduledAt: string; runId?: string; payload?: unknown },
): Promise<{ outcome: FireOutcome; run: RunRecord }> {
  const now = deps.now();
  const run: RunRecord = {
    id: input.runId ?? `run_${randomBytes(12).toString("hex")}`,
    automationId: automation.id,
    orgId: automation.orgId,
    trigger: input.trigger,
    status: "starting",
    scheduledAt: input.scheduledAt,
    startedAt: now.toISOString(),
    endedAt: null,
    sessionId: null,
    summary: null,
    error: null,
  };
  // A redelivered firing: its run exists already (checked before the skip rule, which would
  // otherwise see the first delivery's own run as "the previous one").
  const existing = await deps.store.getRun(run.automationId, run.scheduledAt, run.id);
  if (existing) return { outcome: "duplicate", run: existing };
  const previous = await currentRun(deps, automation);
  if (previous) {
    const skipped: RunRecord = { ...run, status: "skipped", endedAt: now.toISOString(), error: `run ${previous.id} was still ${previous.status}` };
    if (!(await deps.store.putRun(skipped))) return { outcome: "duplicate", run: (await deps.store.getRun(run.automationId, run.scheduledAt, run.id)) ?? skipped };
    putMetric(deps, AUTOMATION_METRICS.runs, 1, "Count", { Status: "skipped" });
    deps.logger.info("automation firing skipped: previous run still active", { automationId: automation.id, runId: run.id, previousRunId: previous.id });
    return { outcome: "skipped", run: skipped };
  }
  // The dedupe (a firing delivered twice, concurrently): the second put affects nothing.
  if (!(await deps.store.putRun(run))) return { outcome: "duplicate", run: (await deps.store.getRun(run.automationId, run.scheduledAt, run.id)) ?? run };
  await deps.store.setActiveRun(automation.orgId, automation.id, { runId: run.id, scheduledAt: run.scheduledAt });
  // The timeout first: a run whose start hangs still ends. Without one it must not stay active
  // (it would skip every later firing): it ends failed.
  try {
    await deps.scheduler.armTimeout(run, new Date(now.getTime() + automation.maxRunSeconds * 1000));
  } catch (err) {
    await endRun(deps, run, "failed", { error: "the run's timeout could not be scheduled (internal error)" });
    throw err;
  }

  const triggerContext: AutomationTriggerContext = {
    automationId: automation.id,
    automationName: automation.name,
    runId: run.id,
    trigger: run.trigger,
    scheduledAt: run.scheduledAt,
    ...(input.payload !== undefined ? { payload: input.payload } : {}),
  };
  const principal = automationPrincipal(automation);
  let created: ApiAnswer;
  try {
    created = await deps.api.call(principal, "CreateSession", {
      path: "/v1/sessions",
      body: {
        clientType: "automation",
        title: `${automation.name} (${run.trigger} ${run.scheduledAt})`.slice(0, 200),
        repos: automation.repos,
        initialPrompt: automation.prompt,
        ...(automation.provider ? { provider: automation.provider } : {}),
        triggerContext,
      },
    });
  } catch (err) {
    await endRun(deps, run, "failed", { error: "the session could not be created (internal error)" });
    throw err;
  }
  const sessionId = (created.body.session as { id?: string } | undefined)?.id;
  if (created.status !== 201 || !sessionId) {
    const ended = await endRun(deps, run, "failed", { error: describeAnswer(created, "create session") });
    return { outcome: "failed", run: ended ?? run };
  }
  const startedRun = (await deps.store.runStarted(run, sessionId)) ? { ...run, status: "running" as const, sessionId } : { ...run, sessionId };
  const resumed = await deps.api.call(principal, "ResumeSession", { path: `/v1/sessions/${sessionId}/resume`, params: { id: sessionId } });
  if (resumed.status >= 300) {
    const ended = await endRun(deps, startedRun, "failed", { error: describeAnswer(resumed, "start session") });
    return { outcome: "failed", run: ended ?? startedRun };
  }
  deps.logger.info("automation run started", { automationId: automation.id, runId: run.id, sessionId, trigger: run.trigger });
  return { outcome: "started", run: startedRun };
}

/**
 * Ends a run once (the first end wins); then the streak, the auto-disable, the timeout's removal,
 * the stop of a timed-out session, the metric and the notifications (not awaited).
 */
export async function endRun(deps: AutomationRunDeps, run: Pick<RunRecord, "automationId" | "orgId" | "scheduledAt" | "id" | "sessionId">, end: RunEnd, detail: { summary?: string; error?: string }): Promise<RunRecord | null> {
  const now = deps.now();
  const ended = await deps.store.endRun(run, end, now, detail);
  if (!ended) return null;
  putMetric(deps, AUTOMATION_METRICS.runs, 1, "Count", { Status: end });
  await deps.scheduler.cancelTimeout(run).catch((err: unknown) => deps.logger.warn("run timeout not deleted (it finds the run ended)", { runId: run.id, error: errorForLog(err) }));
  await deps.store.setActiveRun(run.orgId, run.automationId, null, run.id);
  const before = await deps.store.get(run.orgId, run.automationId, true);
  const after = await deps.store.recordRunEnd(run.orgId, run.automationId, end, now);
  if (before?.enabled && after && !after.enabled) {
    // Auto-disabled (afterRunEnd's rule, in the store's conditional write): the schedule stops too.
    deps.logger.warn("automation disabled after consecutive failures", { automationId: run.automationId, streak: afterRunEnd(before.consecutiveFailures, end).consecutiveFailures });
    await deps.scheduler.put(after);
  }
  if (after) deps.notifier.notify(after, ended);
  deps.logger.info("automation run ended", { automationId: run.automationId, runId: run.id, status: end, sessionId: ended.sessionId });
  return ended;
}

/** The run's timeout schedule fired: a run still going is `timed_out` and its session stopped. */
export async function timeOut(deps: AutomationRunDeps, event: Extract<AutomationFiredEvent, { kind: "timeout" }>): Promise<{ outcome: "timed_out" | "ended"; run?: RunRecord }> {
  const run = await deps.store.getRun(event.automationId, event.scheduledAt, event.runId);
  if (!run || !isRunActive(run.status)) return { outcome: "ended" };
  const ended = await endRun(deps, run, "timed_out", { error: "the run exceeded maxRunSeconds" });
  if (!ended) return { outcome: "ended" };
  const automation = await deps.store.get(run.orgId, run.automationId);
  if (run.sessionId && automation) {
    const stopped = await deps.api.call(automationPrincipal(automation), "StopSession", { path: `/v1/sessions/${run.sessionId}`, params: { id: run.sessionId } });
    if (stopped.status >= 300 && stopped.status !== 409) deps.logger.warn("timed-out run's session not stopped", { runId: run.id, sessionId: run.sessionId, status: stopped.status });
  }
  return { outcome: "timed_out", run: ended };
}

/** The run a session belongs to, from its trigger context (null: not an automation run's session). */
async function runOfSession(deps: AutomationRunDeps, sessionId: string): Promise<{ run: RunRecord; errorMessage: string | null; status: string } | null> {
  const session = await deps.sessions.getSession(sessionId);
  if (!session || session.clientType !== "automation") return null;
  const ref = TriggerContextRef.safeParse(session.triggerContext);
  if (!ref.success) return null;
  const run = await deps.store.getRun(ref.data.automationId, ref.data.scheduledAt, ref.data.runId);
  if (!run || !isRunActive(run.status)) return null;
  return { run: { ...run, sessionId }, errorMessage: session.errorMessage, status: session.status };
}

/**
 * A turn of a session completed (the relay, `completeTurn`): an automation run's prompt turn
 * ends the run, `succeeded` with the start of the final text, or `failed` with the turn's error.
 */
export async function turnSettled(deps: AutomationRunDeps, sessionId: string): Promise<void> {
  const found = await runOfSession(deps, sessionId);
  if (!found) return;
  const [failed, open] = await Promise.all([deps.prompts.list(sessionId, "failed"), deps.prompts.listOpen(sessionId)]);
  const failure = failed[0]?.failure;
  if (failure) {
    await endRun(deps, found.run, "failed", { error: `${failure.code}: ${failure.message}` });
    return;
  }
  // Still a prompt to go (queued or processing): the run's turn is not the last one yet.
  if (open.length > 0) return;
  const page = await deps.transcript.list(sessionId, { limit: 200 });
  const last = [...page.items].reverse().find((m) => m.role === "assistant" && m.text.trim().length > 0);
  await endRun(deps, found.run, "succeeded", { summary: summaryOf(last?.text ?? "") });
}

/**
 * The flow's failure path (`record-failure`, FlowDeps `automationRuns`): an automation run's
 * session that could not be started (status `error`) ends its run `failed` with the message.
 */
export async function sessionFailed(deps: AutomationRunDeps, sessionId: string, message: string): Promise<void> {
  const found = await runOfSession(deps, sessionId);
  if (!found) return;
  await endRun(deps, found.run, "failed", { error: `session error: ${message}` });
}
