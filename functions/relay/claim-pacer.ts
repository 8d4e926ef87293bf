/**
 * Paces a relay's claims (issue 15, bench 5c). A claim's stream connect and first catch-up cost
 * relay CPU (about 10 ms in bench 5: DynamoDB requests through the SDK, three OpenCode requests)
 * on the event loop that also fans out every held stream's events. Run unbounded, a takeover of
 * hundreds of sessions queued that work ahead of the fan-out: p99 104 ms at 2,000 streams against
 * a 20 ms target, with p99 6 ms without the takeover.
 *
 * A permit is held from a claim until its stream's first catch-up ran (or its first connect
 * failed, or `holdMs` passed), and the number of permits follows the event loop's utilization
 * (`performance.eventLoopUtilization`, AIMD): one more after a sample below the target in which
 * every permit was in use, half after a sample above it. Also half after a sample in which the
 * machine's CPUs were busier than their target (`os.cpus()`, every process and thread): a relay
 * worker's loop cannot see its sibling workers, or anything else, taking the cores (bench 5c:
 * takeover p99 25-36 ms without it, 16-42 ms with it). Where claims wait on the network (AWS: a
 * sandbox's TLS handshake, DynamoDB round trips) the loop stays idle and the limit grows to
 * `max`; where they are CPU (the bench's loopback), it stays near one and the fan-out keeps the
 * loop. Nudged claims (a resume, a handover) go ahead of a scan's.
 *
 * No kept library does this: the concurrency limiters on the registry (p-limit, p-queue) take a
 * fixed limit, and load shedders (toobusy-js, under-pressure) refuse work instead of pacing it.
 */
import os from "node:os";
import { performance, type EventLoopUtilization } from "node:perf_hooks";

export type ClaimPriority = "nudge" | "scan";

export interface ClaimPacerOptions {
  /** Permits at first; default 2. */
  initial?: number;
  /** Never fewer than this; default 1. */
  min?: number;
  /** Never more; default 32. */
  max?: number;
  /** Event-loop utilization (0..1) the limit aims under; default 0.5. */
  targetUtilization?: number;
  /** How often the limit may change (a utilization sample), ms; default 100. */
  sampleMs?: number;
  /** Longest a claim holds its permit waiting for its first catch-up, ms; default 5,000. */
  holdMs?: number;
  /** Utilization since the previous call (tests); default the process's event loop. */
  utilization?: () => number;
  /** The machine's CPUs busy (0..1, every process) the limit aims under; default 0.85. */
  targetMachineUtilization?: number;
  /** The machine's CPU utilization since the previous call (tests); default from `os.cpus()`. */
  machineUtilization?: () => number;
  /** Milliseconds, monotonic (tests); default `performance.now`. */
  now?: () => number;
}

/** The share of the machine's CPU time spent busy (any process, any thread) since the previous call. */
export function machineCpuUtilization(): () => number {
  const read = () => os.cpus().reduce((t, c) => ({ idle: t.idle + c.times.idle, total: t.total + c.times.user + c.times.nice + c.times.sys + c.times.idle + c.times.irq }), { idle: 0, total: 0 });
  let last = read();
  return () => {
    const current = read();
    const total = current.total - last.total;
    const busy = total > 0 ? 1 - (current.idle - last.idle) / total : 0;
    last = current;
    return busy;
  };
}

/** Utilization of this process's event loop since the previous call. */
function loopUtilization(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const current = performance.eventLoopUtilization();
    const delta = performance.eventLoopUtilization(current, last);
    last = current;
    return delta.utilization;
  };
}

export class ClaimPacer {
  private limitNow: number;
  private inFlight = 0;
  /** Someone waited for a permit, or every permit was in use, since the last sample. */
  private bound = false;
  private sampledAt: number;
  private readonly waiting: { priority: ClaimPriority; grant: () => void }[] = [];
  private readonly min: number;
  private readonly max: number;
  private readonly target: number;
  private readonly sampleMs: number;
  readonly holdMs: number;
  private readonly utilization: () => number;
  private readonly machineTarget: number;
  private readonly machine: () => number;
  private readonly now: () => number;
  /** Highest limit reached and permits granted (bench figures). */
  readonly stats = { granted: 0, waited: 0, highestLimit: 0, lowestLimit: Number.POSITIVE_INFINITY };

  constructor(options: ClaimPacerOptions = {}) {
    this.min = Math.max(1, options.min ?? 1);
    this.max = Math.max(this.min, options.max ?? 32);
    this.limitNow = Math.min(this.max, Math.max(this.min, options.initial ?? 2));
    this.target = options.targetUtilization ?? 0.5;
    this.sampleMs = options.sampleMs ?? 100;
    this.holdMs = options.holdMs ?? 5_000;
    this.utilization = options.utilization ?? loopUtilization();
    this.machineTarget = options.targetMachineUtilization ?? 0.85;
    // A test that gives the loop's utilization and not the machine's paces on the loop alone.
    this.machine = options.machineUtilization ?? (options.utilization ? () => 0 : machineCpuUtilization());
    this.now = options.now ?? (() => performance.now());
    this.sampledAt = this.now();
    this.utilization();
    this.machine();
    this.note();
  }

  get limit(): number {
    return this.limitNow;
  }

  get active(): number {
    return this.inFlight;
  }

  /** Resolves with a release once a permit is free (nudges first); call the release exactly once (later calls do nothing). */
  async acquire(priority: ClaimPriority): Promise<() => void> {
    this.adjust();
    if (this.inFlight < this.limitNow && this.waiting.length === 0) {
      this.inFlight++;
      if (this.inFlight >= this.limitNow) this.bound = true;
    } else {
      this.bound = true;
      this.stats.waited++;
      await new Promise<void>((grant) => {
        const entry = { priority, grant };
        // Nudges after the nudges already waiting, before every scan claim.
        const at = priority === "nudge" ? this.waiting.findIndex((w) => w.priority === "scan") : -1;
        if (at < 0) this.waiting.push(entry);
        else this.waiting.splice(at, 0, entry);
      });
    }
    this.stats.granted++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.adjust();
      this.dispatch();
    };
  }

  /** Hands free permits to the waiters, in order (a permit handed over stays counted in `inFlight`). */
  private dispatch(): void {
    while (this.inFlight < this.limitNow && this.waiting.length > 0) {
      const next = this.waiting.shift();
      if (!next) return;
      this.inFlight++;
      if (this.inFlight >= this.limitNow) this.bound = true;
      next.grant();
    }
  }

  /** At most once per sample: above the target, half the permits; below it with every permit used, one more. */
  private adjust(): void {
    const at = this.now();
    if (at - this.sampledAt < this.sampleMs) return;
    this.sampledAt = at;
    const used = this.utilization();
    const machine = this.machine();
    if (used > this.target || machine > this.machineTarget) this.limitNow = Math.max(this.min, Math.floor(this.limitNow / 2));
    else if (this.bound) this.limitNow = Math.min(this.max, this.limitNow + 1);
    this.bound = this.inFlight >= this.limitNow || this.waiting.length > 0;
    this.note();
    this.dispatch();
  }

  private note(): void {
    this.stats.highestLimit = Math.max(this.stats.highestLimit, this.limitNow);
    this.stats.lowestLimit = Math.min(this.stats.lowestLimit, this.limitNow);
  }
}
