/**
 * The local lifecycle scheduler: in-process timers with EventBridge Scheduler's semantics as
 * the AWS adapter uses them. One schedule per `scheduleName(target)`; arming a name that exists
 * replaces it; a fired schedule is deleted before its callback runs (so the callback may re-arm
 * the same name); cancelling an unknown name is a no-op; a time in the past fires on the next tick.
 */
import { scheduleName, type LifecycleScheduler, type ScheduleFiredEvent, type ScheduleTarget } from "../../functions/ports/lifecycle-scheduler";
import { setLongTimeout, type LongTimeout } from "./long-timeout";

export { MAX_TIMER_DELAY_MS } from "./long-timeout";

export interface LocalLifecycleSchedulerOptions {
  /** Clock used to turn `at` into a delay; defaults to the system clock. */
  now?: () => Date;
  /** Receives a failed callback's error; defaults to logging it. Never an unhandled rejection. */
  onError?: (err: unknown, event: ScheduleFiredEvent) => void;
}

interface Entry {
  name: string;
  at: Date;
  event: ScheduleFiredEvent;
  timer?: LongTimeout;
}

export class LocalLifecycleScheduler implements LifecycleScheduler {
  private readonly entries = new Map<string, Entry>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly firedCounts = new Map<string, number>();
  private readonly now: () => Date;
  private readonly onError: (err: unknown, event: ScheduleFiredEvent) => void;
  private closed = false;

  constructor(
    private readonly onFire: (event: ScheduleFiredEvent) => Promise<void>,
    options: LocalLifecycleSchedulerOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.onError =
      options.onError ??
      ((err, event) => console.error(`local scheduler: ${scheduleName(event)} callback failed`, err));
  }

  async arm(target: ScheduleTarget, at: Date): Promise<void> {
    // A closed scheduler arms nothing: callbacks still in flight during close() may re-arm, and
    // that must neither outlive close() nor turn a clean shutdown into errors.
    if (this.closed) return;
    const name = scheduleName(target);
    // Built before anything changes: an invalid date throws here (RangeError), as in the AWS adapter.
    const event: ScheduleFiredEvent = { sessionId: target.sessionId, purpose: target.purpose, at: at.toISOString() };
    this.clear(name);
    const entry: Entry = { name, at: new Date(at.getTime()), event };
    this.entries.set(name, entry);
    // Chunked past setTimeout's limit (long-timeout.ts): a far expiry never fires early.
    entry.timer = setLongTimeout(() => {
      if (this.entries.get(entry.name) === entry) this.fire(entry); // else replaced or cancelled meanwhile
    }, at.getTime() - this.now().getTime());
  }

  async cancel(target: ScheduleTarget): Promise<void> {
    this.clear(scheduleName(target));
  }

  /** Armed schedules, soonest first (tests and ops). */
  pending(): { name: string; at: Date }[] {
    return [...this.entries.values()]
      .map((e) => ({ name: e.name, at: new Date(e.at.getTime()) }))
      .sort((a, b) => a.at.getTime() - b.at.getTime());
  }

  /** How many times the schedule `name` has fired (tests wait on this rather than on time). */
  fired(name: string): number {
    return this.firedCounts.get(name) ?? 0;
  }

  /** Resolves once no callback of a fired schedule is running. */
  async whenIdle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** Clears every timer and waits for callbacks already running. */
  async close(): Promise<void> {
    this.closed = true;
    for (const name of [...this.entries.keys()]) this.clear(name);
    await this.whenIdle();
  }

  private clear(name: string): void {
    const entry = this.entries.get(name);
    if (!entry) return;
    entry.timer?.clear();
    this.entries.delete(name);
  }

  private fire(entry: Entry): void {
    // Deleted before the callback runs: the callback sees no schedule and may re-arm the name.
    this.entries.delete(entry.name);
    this.firedCounts.set(entry.name, this.fired(entry.name) + 1);
    const event = entry.event;
    const run: Promise<void> = Promise.resolve()
      .then(() => this.onFire(event))
      .catch((err: unknown) => {
        try {
          this.onError(err, event);
        } catch (reportErr) {
          console.error("local scheduler: onError threw", reportErr);
        }
      })
      .finally(() => this.inFlight.delete(run));
    this.inFlight.add(run);
  }
}
