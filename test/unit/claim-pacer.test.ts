/**
 * The relay's claim pacer (functions/relay/claim-pacer.ts, issue 15): permits for claims, their
 * number following the event loop's utilization (AIMD), nudges before scans. The utilization
 * and the clock are the test's.
 */
import os from "node:os";
import { describe, expect, it } from "vitest";
import { ClaimPacer, machineCpuUtilization } from "../../functions/relay/claim-pacer";

function pacer(options: { initial?: number; max?: number; minDuty?: number } = {}) {
  const state = { utilization: 0, machine: 0, now: 0 };
  const p = new ClaimPacer({
    sampleMs: 100,
    targetUtilization: 0.5,
    targetMachineUtilization: 0.85,
    ...options,
    utilization: () => state.utilization,
    machineUtilization: () => state.machine,
    now: () => state.now,
  });
  return { p, state };
}

/** An acquire whose grant can be checked before it is awaited. */
function asked(p: ClaimPacer, priority: "nudge" | "scan") {
  const seen = { granted: false };
  const release = p.acquire(priority).then((r) => {
    seen.granted = true;
    return r;
  });
  return { seen, release };
}

/** Releases a permit; the waiter, spaced, is not granted at once. Resolves with the waiter's release once granted. */
async function spacedAfter(release: () => void, waiter: ReturnType<typeof asked>): Promise<() => void> {
  release();
  await tick();
  expect(waiter.seen.granted).toBe(false);
  return waiter.release;
}

/** Settles pending microtasks (granted waiters run their continuations). */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("claim pacer", () => {
  it("grants up to its limit at once; the next waits until a permit is released", async () => {
    const { p } = pacer({ initial: 2 });
    const a = await p.acquire("scan");
    await p.acquire("scan");
    let third = false;
    const waiting = p.acquire("scan").then((release) => {
      third = true;
      return release;
    });
    await tick();
    expect(third).toBe(false);
    expect(p.active).toBe(2);
    a();
    await waiting;
    expect(third).toBe(true);
    expect(p.active).toBe(2);
  });

  it("a release called twice frees one permit", async () => {
    const { p } = pacer({ initial: 1 });
    const a = await p.acquire("scan");
    a();
    a();
    expect(p.active).toBe(0);
    await p.acquire("scan");
    let second = false;
    void p.acquire("scan").then(() => (second = true));
    await tick();
    expect(second).toBe(false);
  });

  it("nudged claims go ahead of waiting scan claims, in their own order", async () => {
    const { p } = pacer({ initial: 1 });
    const first = await p.acquire("scan");
    const order: string[] = [];
    // Each one, once granted, notes itself and releases at once, letting the next one in.
    const waits = ["scan-1", "scan-2", "nudge-1", "nudge-2"].map((name) =>
      p.acquire(name.startsWith("nudge") ? "nudge" : "scan").then((release) => {
        order.push(name);
        release();
      }),
    );
    await tick();
    expect(order).toEqual([]);
    first();
    await Promise.all(waits);
    expect(order).toEqual(["nudge-1", "nudge-2", "scan-1", "scan-2"]);
  });

  it("grows by one per sample while the loop is under its target and every permit is in use", async () => {
    const { p, state } = pacer({ initial: 1, max: 3 });
    state.utilization = 0.2;
    let release = await p.acquire("scan");
    for (let i = 0; i < 5; i++) {
      state.now += 100;
      // Every permit in use: the next acquire (after a sample) may get one more.
      const next = p.acquire("scan");
      release();
      release = await next;
    }
    expect(p.limit).toBe(3);
  });

  it("does not grow when permits were left unused (nothing to pace)", async () => {
    const { p, state } = pacer({ initial: 2 });
    state.utilization = 0.1;
    for (let i = 0; i < 5; i++) {
      state.now += 100;
      (await p.acquire("scan"))();
    }
    expect(p.limit).toBe(2);
  });

  it("halves after a sample over the target, never below one, and a freed permit is not handed out over the new limit", async () => {
    const { p, state } = pacer({ initial: 8 });
    const held = await Promise.all(Array.from({ length: 8 }, () => p.acquire("scan")));
    state.utilization = 0.9;
    state.now += 100;
    let granted: (() => void) | null = null;
    const waiter = p.acquire("scan").then((release) => (granted = release));
    expect(p.limit).toBe(4);
    // 8 in flight over a limit of 4: after four releases 4 are left, at the limit: the waiter still waits.
    for (const release of held.slice(0, 4)) release();
    await tick();
    expect(granted).toBeNull();
    held[4]?.();
    await waiter;
    expect(granted).not.toBeNull();
    for (const release of [...held.slice(5), granted ?? (() => undefined)]) release();
    expect(p.active).toBe(0);
    for (let i = 0; i < 5; i++) {
      state.now += 100;
      (await p.acquire("scan"))();
    }
    expect(p.limit).toBe(1);
  });

  it("measures this process's event loop when no utilization source is given", async () => {
    const p = new ClaimPacer({ initial: 4, sampleMs: 50, targetUtilization: 0.5 });
    // Within one sample: no change.
    (await p.acquire("scan"))();
    expect(p.limit).toBe(4);
    // The loop busy for the whole next sample: utilization near 1, so the limit halves.
    const until = performance.now() + 200;
    while (performance.now() < until);
    (await p.acquire("scan"))();
    expect(p.limit).toBe(2);
  });

  it("halves when the machine's CPUs are busy over their target, even with its own loop under its target (sibling workers, other processes)", async () => {
    const { p, state } = pacer({ initial: 8 });
    state.utilization = 0.1;
    state.machine = 0.95;
    state.now += 100;
    (await p.acquire("scan"))();
    expect(p.limit).toBe(4);
    // Under both targets, with every permit in use: it grows again.
    state.machine = 0.5;
    const held = await Promise.all(Array.from({ length: 4 }, () => p.acquire("scan")));
    state.now += 100;
    const next = p.acquire("scan");
    for (const release of held) release();
    (await next)();
    expect(p.limit).toBe(5);
  });

  it("at one permit and still over a target, it spaces claims: after a release the next waits held × (1 / duty − 1)", async () => {
    const { p, state } = pacer({ initial: 1 });
    state.machine = 0.95;
    state.now = 100;
    const first = await p.acquire("scan");
    // The sample over the target at the fewest permits halved the share of the time a permit may be held.
    expect(p.limit).toBe(1);
    expect(p.duty).toBe(0.5);
    const next = asked(p, "scan");
    // Held 20 ms: at a duty of 1/2 the next claim waits 20 ms more.
    state.now = 120;
    const granted = spacedAfter(first, next);
    expect(p.active).toBe(0);
    const second = await granted;
    expect(p.active).toBe(1);
    expect(p.stats.spacedMs).toBe(20);
    // A nudge asked while spaced waits too (the spacing is for every claim), and is the next one in.
    state.now = 130;
    const nudge = asked(p, "nudge");
    (await spacedAfter(second, nudge))();
    expect(p.stats.spacedMs).toBe(30);
  });

  it("a release while a claim waits for its spacing pushes the spacing further: the wait is not cut short", async () => {
    const state = { now: 100 };
    const p = new ClaimPacer({ min: 2, initial: 2, sampleMs: 100, utilization: () => 0.1, machineUtilization: () => 0.95, now: () => state.now });
    state.now = 200;
    const a = await p.acquire("scan");
    expect(p.duty).toBe(0.5);
    const b = await p.acquire("scan");
    const c = asked(p, "scan");
    // a held 10 ms: no claim before 220. Then b, held 30 ms: none before 260.
    state.now = 210;
    a();
    state.now = 230;
    (await spacedAfter(b, c))();
    // Both waits served: 10 ms, then the 30 ms b's release asked for from 230.
    expect(p.stats.spacedMs).toBe(40);
  });

  it("the share of the time halves per sample over a target down to minDuty, and comes back by minDuty per sample under it before the permits grow", async () => {
    const { p, state } = pacer({ initial: 2, minDuty: 0.25 });
    state.utilization = 0.9;
    // Released at the time it was granted: held 0 ms, so nothing is spaced and each acquire samples.
    let release = await p.acquire("scan");
    const samples = async (count: number) => {
      const seen: [number, number][] = [];
      for (let i = 0; i < count; i++) {
        release();
        state.now += 100;
        release = await p.acquire("scan");
        seen.push([p.limit, p.duty]);
      }
      return seen;
    };
    // Permits first (2 → 1), then the duty (1/2, 1/4), never under minDuty.
    expect(await samples(4)).toEqual([
      [1, 1],
      [1, 0.5],
      [1, 0.25],
      [1, 0.25],
    ]);
    expect(p.stats.lowestDuty).toBe(0.25);
    state.utilization = 0.1;
    // Every permit was in use: the duty comes back first, then one more permit.
    expect(await samples(4)).toEqual([
      [1, 0.5],
      [1, 0.75],
      [1, 1],
      [2, 1],
    ]);
    release();
  });

  it("a sample over a long quiet stretch (no claim in it) changes nothing: the next one decides", async () => {
    const { p, state } = pacer({ initial: 1 });
    state.utilization = 0.1;
    // Every permit in use, then nothing for 5 s (the loop was idle: utilization low).
    (await p.acquire("scan"))();
    state.now += 5_000;
    let release = await p.acquire("scan");
    expect(p.limit).toBe(1);
    release();
    // A sample of an ordinary length, under the target with every permit used: it grows.
    state.now += 100;
    release = await p.acquire("scan");
    expect(p.limit).toBe(2);
    release();
  });

  it("measures the machine's CPUs from os.cpus(): a thread spinning shows in the next reading", () => {
    const machine = machineCpuUtilization();
    const until = performance.now() + 300;
    while (performance.now() < until);
    const busy = machine();
    // One of the machine's CPUs busy (at least, most of the window): its share of the total.
    expect(busy).toBeGreaterThan(0.5 / os.cpus().length);
    expect(busy).toBeLessThanOrEqual(1);
  });
});
