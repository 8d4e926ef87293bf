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
 * One permit can still be too many: four workers' single claims, with the store and agent work
 * they cause, kept a 2-CPU machine at 100% for a whole takeover (bench 5c, sampled every 100 ms),
 * and the slow deltas were mostly on workers whose own loop was under half busy: they waited for
 * a core. So below one permit the pacer spaces claims instead: a duty cycle, the share of the time
 * a permit may be held (halved after a sample over a target, down to `minDuty`; `minDuty` more
 * after one under both with every permit used, back to 1 before the permits grow). After a
 * release the next claim waits `held × (1 / duty − 1)`. A takeover then takes longer (bench 5c:
 * 500 sessions in 7.4-9.6 s instead of 5.2-7.1 s; the 10,000 streams at start 84-131 claims a
 * second instead of 127-153) and the fan-out of what the relay already streams keeps its cores
 * (takeover p99 in paired runs 29-72 ms before, 16-32 ms after). Nudged
 * claims are spaced too, and still go first. Where claims wait on the network the loop and the
 * machine stay under their targets, and nothing is spaced.
 *
 * No kept library does this: the concurrency limiters on the registry (p-limit, p-queue) take a
 * fixed limit, and load shedders (toobusy-js, under-pressure) refuse work instead of pacing it.
 */
import os from "node:os";
import { performance, type EventLoopUtilization } from "node:perf_hooks";

export type ClaimPriority = "nudge" | "scan";

/** A sample window longer than this many `sampleMs` (no claim asked or released in it) changes nothing (with `sampleMs` 0, none is). */
const STALE_SAMPLES = 10;

export interface ClaimPacerOptions {
  /** Permits at first; default 2. */
  initial?: number;
  /** Never fewer than this; default 1. */
  min?: number;
  /** At `min` permits and still over a target, the share of the time a permit may be held, never under this (0..1]; default 1/8. */
  minDuty?: number;
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
  /** The share of the time a permit may be held (1: no spacing). Below 1 only at `min` permits. */
  private dutyNow = 1;
  /** No permit is granted before this (`now()`, ms): the spacing after the last release. */
  private notBefore = 0;
  private spacing: ReturnType<typeof setTimeout> | null = null;
  private readonly minDuty: number;
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
  readonly stats = { granted: 0, waited: 0, highestLimit: 0, lowestLimit: Number.POSITIVE_INFINITY, lowestDuty: 1, spacedMs: 0 };

  constructor(options: ClaimPacerOptions = {}) {
    this.min = Math.max(1, options.min ?? 1);
    this.max = Math.max(this.min, options.max ?? 32);
    this.limitNow = Math.min(this.max, Math.max(this.min, options.initial ?? 2));
    this.minDuty = Math.min(1, Math.max(0.01, options.minDuty ?? 1 / 8));
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

  /** The share of the time a permit may be held: 1 unless one permit was too many. */
  get duty(): number {
    return this.dutyNow;
  }

  /** Resolves with a release once a permit is free (nudges first); call the release exactly once (later calls do nothing). */
  async acquire(priority: ClaimPriority): Promise<() => void> {
    this.adjust();
    if (this.inFlight < this.limitNow && this.waiting.length === 0 && this.now() >= this.notBefore) {
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
        // Waiting for the spacing rather than for a permit: the timer is set here.
        this.dispatch();
      });
    }
    this.stats.granted++;
    const grantedAt = this.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.adjust();
      if (this.dutyNow < 1) {
        const at = this.now();
        const gap = (at - grantedAt) * (1 / this.dutyNow - 1);
        this.notBefore = Math.max(this.notBefore, at + gap);
      }
      this.dispatch();
    };
  }

  /** Hands free permits to the waiters, in order (a permit handed over stays counted in `inFlight`). */
  private dispatch(): void {
    const wait = this.notBefore - this.now();
    if (wait > 0 && this.waiting.length > 0) {
      // Spaced (duty under 1): one timer for the earliest grant. Its wait served, the grant follows
      // whatever `now()` says (a test's clock does not move with real time).
      if (!this.spacing) {
        const until = this.notBefore;
        this.spacing = setTimeout(() => {
          this.spacing = null;
          this.stats.spacedMs += wait;
          // A release meanwhile may have pushed the spacing further: then dispatch waits again.
          if (this.notBefore === until) this.notBefore = 0;
          this.dispatch();
        }, wait);
        this.spacing.unref?.();
      }
      return;
    }
    while (this.inFlight < this.limitNow && this.waiting.length > 0) {
      const next = this.waiting.shift();
      if (!next) return;
      this.inFlight++;
      if (this.inFlight >= this.limitNow) this.bound = true;
      next.grant();
    }
  }

  /**
   * At most once per sample: over a target, half the permits (at the fewest, half the duty);
   * under both with every permit used, the duty back by `minDuty`, then one more permit.
   */
  private adjust(): void {
    const at = this.now();
    if (at - this.sampledAt < this.sampleMs) return;
    // No claim for a while (the last at start, or at the last takeover): the utilization over that
    // stretch says nothing about the burst starting now, and grew the permits at its first claims
    // (bench 5c: a takeover's first sample covered the ~40 s since the initial claims, the loop
    // mostly idle in them). It changes nothing; the next sample decides.
    const stale = this.sampleMs > 0 && at - this.sampledAt > this.sampleMs * STALE_SAMPLES;
    this.sampledAt = at;
    const used = this.utilization();
    const machine = this.machine();
    if (!stale && (used > this.target || machine > this.machineTarget)) {
      // Halve the permits; at the fewest, halve the share of the time one may be held.
      if (this.limitNow > this.min) this.limitNow = Math.max(this.min, Math.floor(this.limitNow / 2));
      else this.dutyNow = Math.max(this.minDuty, this.dutyNow / 2);
    } else if (!stale && this.bound) {
      if (this.dutyNow < 1) this.dutyNow = Math.min(1, this.dutyNow + this.minDuty);
      else this.limitNow = Math.min(this.max, this.limitNow + 1);
    }
    if (this.dutyNow >= 1) this.notBefore = 0;
    this.bound = this.inFlight >= this.limitNow || this.waiting.length > 0;
    this.note();
    this.dispatch();
  }

  private note(): void {
    this.stats.highestLimit = Math.max(this.stats.highestLimit, this.limitNow);
    this.stats.lowestLimit = Math.min(this.stats.lowestLimit, this.limitNow);
    this.stats.lowestDuty = Math.min(this.stats.lowestDuty, this.dutyNow);
  }
}
