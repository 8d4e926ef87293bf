/**
 * The local lifecycle scheduler under fake timers (the clock moves only when the test moves it):
 * the same semantics the EventBridge adapter relies on, plus setTimeout-overflow chaining.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ScheduleFiredEvent, ScheduleTarget } from "../../functions/ports/lifecycle-scheduler";
import { LocalLifecycleScheduler, MAX_TIMER_DELAY_MS } from "../../infra/local/local-lifecycle-scheduler";

const T0 = new Date("2025-03-01T12:00:00.000Z");
const expiry: ScheduleTarget = { sessionId: "ses_1", purpose: "expiry" };
const idle: ScheduleTarget = { sessionId: "ses_1", purpose: "idle-check" };
const later = (ms: number) => new Date(T0.getTime() + ms);

function recording() {
  const fired: ScheduleFiredEvent[] = [];
  const errors: { err: unknown; event: ScheduleFiredEvent }[] = [];
  return { fired, errors, onError: (err: unknown, event: ScheduleFiredEvent) => errors.push({ err, event }) };
}

let scheduler: LocalLifecycleScheduler | undefined;

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
});

afterEach(async () => {
  await scheduler?.close();
  scheduler = undefined;
  vi.useRealTimers();
});

describe("LocalLifecycleScheduler", () => {
  it("fires once, at the time, with the requested time in the event", async () => {
    const r = recording();
    scheduler = new LocalLifecycleScheduler(async (e) => void r.fired.push(e), { onError: r.onError });
    await scheduler.arm(expiry, later(5000));
    expect(scheduler.pending()).toEqual([{ name: "expiry-ses_1", at: later(5000) }]);

    await vi.advanceTimersByTimeAsync(4999);
    expect(r.fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.fired).toEqual([{ sessionId: "ses_1", purpose: "expiry", at: "2025-03-01T12:00:05.000Z" }]);
    expect(scheduler.pending()).toEqual([]);

    await vi.advanceTimersByTimeAsync(60_000);
    expect(r.fired).toHaveLength(1);
    expect(r.errors).toEqual([]);
  });

  it("counts each schedule's firings, and whenIdle waits for the callbacks still running (what tests wait on instead of time)", async () => {
    let finish!: () => void;
    const running = new Promise<void>((resolve) => (finish = resolve));
    let done = false;
    scheduler = new LocalLifecycleScheduler(async () => {
      await running;
      done = true;
    });
    await scheduler.arm(idle, later(1000));
    expect(scheduler.fired("idle-check-ses_1")).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(scheduler.fired("idle-check-ses_1")).toBe(1);
    expect(scheduler.fired("expiry-ses_1")).toBe(0);
    const idleNow = scheduler.whenIdle();
    finish();
    await idleNow;
    expect(done).toBe(true);
    await scheduler.arm(idle, later(2000));
    await vi.advanceTimersByTimeAsync(1000);
    expect(scheduler.fired("idle-check-ses_1")).toBe(2);
  });

  it("replaces a schedule on re-arm: only the new time fires (later or earlier)", async () => {
    const r = recording();
    scheduler = new LocalLifecycleScheduler(async (e) => void r.fired.push(e), { onError: r.onError });
    await scheduler.arm(expiry, later(5000));
    await scheduler.arm(expiry, later(10_000));
    expect(scheduler.pending()).toEqual([{ name: "expiry-ses_1", at: later(10_000) }]);

    await vi.advanceTimersByTimeAsync(9999);
    expect(r.fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.fired.map((e) => e.at)).toEqual(["2025-03-01T12:00:10.000Z"]);

    await scheduler.arm(idle, later(30_000));
    await scheduler.arm(idle, later(20_000));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(r.fired.map((e) => `${e.purpose}@${e.at}`)).toEqual(["expiry@2025-03-01T12:00:10.000Z", "idle-check@2025-03-01T12:00:20.000Z"]);
  });

  it("keeps one schedule per (session, purpose)", async () => {
    scheduler = new LocalLifecycleScheduler(async () => {});
    await scheduler.arm(idle, later(2000));
    await scheduler.arm(expiry, later(1000));
    await scheduler.arm({ sessionId: "ses_2", purpose: "expiry" }, later(3000));
    expect(scheduler.pending().map((p) => p.name)).toEqual(["expiry-ses_1", "idle-check-ses_1", "expiry-ses_2"]);
  });

  it("cancel prevents firing; cancel of an unknown name is a no-op", async () => {
    const r = recording();
    scheduler = new LocalLifecycleScheduler(async (e) => void r.fired.push(e), { onError: r.onError });
    await scheduler.arm(expiry, later(5000));
    await scheduler.arm(idle, later(5000));
    await scheduler.cancel(expiry);
    await expect(scheduler.cancel({ sessionId: "nobody", purpose: "expiry" })).resolves.toBeUndefined();
    expect(scheduler.pending().map((p) => p.name)).toEqual(["idle-check-ses_1"]);

    await vi.advanceTimersByTimeAsync(10_000);
    expect(r.fired.map((e) => e.purpose)).toEqual(["idle-check"]);
    await expect(scheduler.cancel(idle)).resolves.toBeUndefined(); // already fired: no-op
  });

  it("deletes a fired schedule before its callback runs, so the callback can re-arm the name", async () => {
    const seenPending: string[][] = [];
    const fired: string[] = [];
    scheduler = new LocalLifecycleScheduler(async (e) => {
      seenPending.push((scheduler?.pending() ?? []).map((p) => p.name));
      fired.push(e.at);
      if (fired.length === 1) await scheduler?.arm(idle, later(2000));
    });
    await scheduler.arm(idle, later(1000));

    await vi.advanceTimersByTimeAsync(1000);
    expect(seenPending).toEqual([[]]);
    expect(scheduler.pending()).toEqual([{ name: "idle-check-ses_1", at: later(2000) }]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(fired).toEqual(["2025-03-01T12:00:01.000Z", "2025-03-01T12:00:02.000Z"]);
    expect(scheduler.pending()).toEqual([]);
  });

  it("fires a time in the past on the next tick, not inside arm()", async () => {
    const r = recording();
    scheduler = new LocalLifecycleScheduler(async (e) => void r.fired.push(e), { onError: r.onError });
    await scheduler.arm(expiry, later(-3_600_000));
    expect(r.fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.fired).toEqual([{ sessionId: "ses_1", purpose: "expiry", at: "2025-03-01T11:00:00.000Z" }]);
  });

  it("chains timers for delays beyond setTimeout's limit and never fires early", async () => {
    const r = recording();
    scheduler = new LocalLifecycleScheduler(async (e) => void r.fired.push(e), { onError: r.onError });
    const delay = 2 * MAX_TIMER_DELAY_MS + 12_345; // about 50 days
    await scheduler.arm(expiry, later(delay));

    await vi.advanceTimersByTimeAsync(1);
    expect(r.fired).toEqual([]); // an overflowing setTimeout would have fired here
    await vi.advanceTimersByTimeAsync(MAX_TIMER_DELAY_MS);
    expect(r.fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(delay - MAX_TIMER_DELAY_MS - 2);
    expect(r.fired).toEqual([]);
    expect(scheduler.pending()).toEqual([{ name: "expiry-ses_1", at: later(delay) }]);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.fired).toEqual([{ sessionId: "ses_1", purpose: "expiry", at: later(delay).toISOString() }]);
  });

  it("does not stall a long chain when the injected clock does not advance", async () => {
    const fired: string[] = [];
    scheduler = new LocalLifecycleScheduler(async (e) => void fired.push(e.at), { now: () => T0 });
    await scheduler.arm(expiry, later(MAX_TIMER_DELAY_MS + 5));
    await vi.advanceTimersByTimeAsync(MAX_TIMER_DELAY_MS + 4);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toHaveLength(1);
  });

  it("sends a callback failure (async or sync) to onError, never an unhandled rejection", async () => {
    const r = recording();
    const boom = new Error("flow start failed");
    scheduler = new LocalLifecycleScheduler(
      (e) => {
        if (e.purpose === "idle-check") throw new Error("sync failure");
        return Promise.reject(boom);
      },
      { onError: r.onError },
    );
    await scheduler.arm(expiry, later(1000));
    await scheduler.arm(idle, later(2000));
    await vi.advanceTimersByTimeAsync(2000);

    expect(r.errors).toHaveLength(2);
    expect(r.errors[0]).toEqual({ err: boom, event: { sessionId: "ses_1", purpose: "expiry", at: "2025-03-01T12:00:01.000Z" } });
    expect((r.errors[1]?.err as Error).message).toBe("sync failure");
    expect(r.errors[1]?.event.purpose).toBe("idle-check");
  });

  it("close() clears every timer, waits for callbacks in flight, and arms nothing afterwards", async () => {
    const fired: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let finished = false;
    scheduler = new LocalLifecycleScheduler(async (e) => {
      fired.push(e.purpose);
      await gate;
      finished = true;
    });
    await scheduler.arm(idle, later(1000));
    await scheduler.arm(expiry, later(5000));
    await vi.advanceTimersByTimeAsync(1000);
    expect(fired).toEqual(["idle-check"]);

    let closed = false;
    const closing = scheduler.close().then(() => (closed = true));
    expect(scheduler.pending()).toEqual([]);
    await vi.advanceTimersByTimeAsync(10);
    expect(closed).toBe(false);
    release();
    await closing;
    expect(finished).toBe(true);

    await scheduler.arm(expiry, later(6000));
    expect(scheduler.pending()).toEqual([]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(fired).toEqual(["idle-check"]);
  });

  it("rejects an invalid date without touching the existing schedule", async () => {
    scheduler = new LocalLifecycleScheduler(async () => {});
    await scheduler.arm(expiry, later(1000));
    await expect(scheduler.arm(expiry, new Date(Number.NaN))).rejects.toBeInstanceOf(RangeError);
    expect(scheduler.pending()).toEqual([{ name: "expiry-ses_1", at: later(1000) }]);
  });
});
