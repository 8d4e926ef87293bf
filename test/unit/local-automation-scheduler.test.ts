/**
 * The local automation scheduler under fake timers (the clock moves only when the test moves it):
 * a schedule further out than setTimeout can hold (2^31-1 ms, about 24.8 days) fires at its time,
 * never when the first chunk runs out; a run's far timeout likewise.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AutomationRecord } from "../../functions/automations/automation";
import type { AutomationFiredEvent } from "../../functions/ports/automations";
import { LocalAutomationScheduler } from "../../infra/local/local-automation-scheduler";
import { MAX_TIMER_DELAY_MS } from "../../infra/local/long-timeout";

const T0 = new Date("2025-03-01T12:00:00.000Z");
const DAY_MS = 86_400_000;

function automation(schedule: string): AutomationRecord {
  return {
    id: "aut_longwait01",
    orgId: "org-a",
    userId: "user-a",
    name: "monthly",
    schedule,
    timezone: "UTC",
    repos: [],
    prompt: "report",
    enabled: true,
    disabledReason: null,
    provider: null,
    maxRunSeconds: 3600,
    notify: null,
    webhookSecret: { v: 1, alg: "AES-256-GCM", wrappedKey: "", iv: "", tag: "", ciphertext: "" } as unknown as AutomationRecord["webhookSecret"],
    scheduleAnchor: T0.toISOString(),
    consecutiveFailures: 0,
    activeRun: null,
    lastRunAt: null,
    createdAt: T0.toISOString(),
    updatedAt: T0.toISOString(),
  };
}

let scheduler: LocalAutomationScheduler | undefined;
const fired: AutomationFiredEvent[] = [];

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
  fired.length = 0;
  scheduler = new LocalAutomationScheduler(async (e) => void fired.push(e), { now: () => new Date(), onError: (err) => { throw err; } });
});

afterEach(async () => {
  await scheduler?.close();
  scheduler = undefined;
  vi.useRealTimers();
});

describe("LocalAutomationScheduler: delays past setTimeout's limit", () => {
  it("a rate(40 days) schedule fires at day 40, not when the first 24.8-day chunk runs out", async () => {
    await scheduler?.put(automation("rate(40 days)"));
    await vi.advanceTimersByTimeAsync(MAX_TIMER_DELAY_MS + 1000);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(40 * DAY_MS - (MAX_TIMER_DELAY_MS + 1000) - 1);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual([{ kind: "fire", orgId: "org-a", automationId: "aut_longwait01", scheduledAt: new Date(T0.getTime() + 40 * DAY_MS).toISOString() }]);
    // And the next one is armed for day 80.
    expect(scheduler?.armed()).toEqual(["aut_longwait01"]);
  });

  it("disabling during the wait (past the first chunk) cancels it", async () => {
    const a = automation("rate(40 days)");
    await scheduler?.put(a);
    await vi.advanceTimersByTimeAsync(MAX_TIMER_DELAY_MS + 1000);
    await scheduler?.put({ ...a, enabled: false });
    await vi.advanceTimersByTimeAsync(40 * DAY_MS);
    expect(fired).toEqual([]);
    expect(scheduler?.armed()).toEqual([]);
  });

  it("a run's timeout 30 days out fires then, not after 24.8 days", async () => {
    const run = { id: "run_far", automationId: "aut_longwait01", orgId: "org-a", scheduledAt: T0.toISOString() };
    await scheduler?.armTimeout(run, new Date(T0.getTime() + 30 * DAY_MS));
    await vi.advanceTimersByTimeAsync(30 * DAY_MS - 1);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual([{ kind: "timeout", orgId: "org-a", automationId: "aut_longwait01", runId: "run_far", scheduledAt: T0.toISOString() }]);
  });
});
