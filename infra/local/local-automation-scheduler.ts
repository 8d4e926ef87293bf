/**
 * The local automation scheduler: timers with the AWS adapter's semantics
 * (functions/adapters/aws/eventbridge-automation-scheduler.ts). One recurring entry per
 * automation: the next firing is computed by the same `nextRunAt` (croner for cron, in the
 * automation's timezone) and, when it fires, the next one is armed before the handler runs
 * (a slow run never delays the schedule, as with EventBridge). A disabled automation keeps no
 * timer. One one-time timeout per run. Every firing goes to the same `automation-fired`
 * handler as in AWS, with the scheduled time in the event. Delays past setTimeout's limit (a
 * monthly cron) wait in chunks (long-timeout.ts): a timer never fires before its time.
 */
import type { AutomationRecord, RunRecord } from "../../functions/automations/automation";
import { nextRunAt, parseSchedule } from "../../functions/automations/schedule-expression";
import type { AutomationFiredEvent, AutomationScheduler } from "../../functions/ports/automations";
import { setLongTimeout, type LongTimeout } from "./long-timeout";

export class LocalAutomationScheduler implements AutomationScheduler {
  private readonly recurring = new Map<string, LongTimeout>();
  private readonly timeouts = new Map<string, LongTimeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;
  /** Firings delivered, by automation id (tests). */
  readonly fired = new Map<string, number>();

  constructor(
    private readonly onFire: (event: AutomationFiredEvent) => Promise<void>,
    private readonly options: { now: () => Date; onError: (err: unknown, event: AutomationFiredEvent) => void },
  ) {}

  private deliver(event: AutomationFiredEvent): void {
    const p = this.onFire(event)
      .catch((err: unknown) => this.options.onError(err, event))
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  private armNext(automation: AutomationRecord, after: Date): void {
    const parsed = parseSchedule(automation.schedule, automation.timezone);
    const at = nextRunAt(parsed, automation.timezone, new Date(automation.scheduleAnchor), after);
    if (!at) return;
    const timer = setLongTimeout(() => {
      if (this.closed) return;
      this.recurring.delete(automation.id);
      this.fired.set(automation.id, (this.fired.get(automation.id) ?? 0) + 1);
      // The next firing first: a run taking longer than the interval meets the skip rule, not a late timer.
      this.armNext(automation, at);
      this.deliver({ kind: "fire", orgId: automation.orgId, automationId: automation.id, scheduledAt: at.toISOString() });
    }, at.getTime() - this.options.now().getTime());
    this.recurring.set(automation.id, timer);
  }

  put(automation: AutomationRecord): Promise<void> {
    this.clear(this.recurring, automation.id);
    if (!this.closed && automation.enabled) this.armNext(automation, this.options.now());
    return Promise.resolve();
  }

  remove(automation: Pick<AutomationRecord, "id" | "orgId">): Promise<void> {
    this.clear(this.recurring, automation.id);
    return Promise.resolve();
  }

  armTimeout(run: Pick<RunRecord, "id" | "automationId" | "orgId" | "scheduledAt">, at: Date): Promise<void> {
    this.clear(this.timeouts, run.id);
    if (this.closed) return Promise.resolve();
    const timer = setLongTimeout(() => {
      this.timeouts.delete(run.id);
      if (!this.closed) this.deliver({ kind: "timeout", orgId: run.orgId, automationId: run.automationId, runId: run.id, scheduledAt: run.scheduledAt });
    }, at.getTime() - this.options.now().getTime());
    this.timeouts.set(run.id, timer);
    return Promise.resolve();
  }

  cancelTimeout(run: Pick<RunRecord, "id">): Promise<void> {
    this.clear(this.timeouts, run.id);
    return Promise.resolve();
  }

  /** Automations with a recurring timer armed (tests). */
  armed(): string[] {
    return [...this.recurring.keys()];
  }

  private clear(map: Map<string, LongTimeout>, key: string): void {
    map.get(key)?.clear();
    map.delete(key);
  }

  /** Every firing delivered so far has been handled. */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.recurring.values()) t.clear();
    for (const t of this.timeouts.values()) t.clear();
    this.recurring.clear();
    this.timeouts.clear();
    await this.settled();
  }
}
