/**
 * RelayWorkers (functions/relay/workers.ts) with real worker threads running a fake relay
 * (test/fixtures/relay-worker.ts, driven by its workerData): start, the summed held reports,
 * requests, a restart after a worker dies, drain, and a start that fails.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RelayWorkers, type RelayWorkersOptions } from "../../functions/relay/workers";
import type { FixtureReply, FixtureRequest, FixtureWorkerData } from "../fixtures/relay-worker";
import { capturingLogger } from "../support/capturing-logger";
import { waitFor } from "../support/wait-for";

const script = new URL("../fixtures/relay-worker.ts", import.meta.url);

let dir: string;
const started: RelayWorkers<FixtureWorkerData>[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "relay-workers-"));
});
afterEach(async () => {
  // No thread outlives its test, whatever it asserted.
  await Promise.all(started.splice(0).map((w) => w.drain().catch(() => undefined)));
  rmSync(dir, { recursive: true, force: true });
});

/** How many times worker `index` started (the fixture's run log). */
function runsOf(index: number): number {
  const file = join(dir, `starts-${index}`);
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).length : 0;
}

function workers(count: number, data: (index: number) => Omit<FixtureWorkerData, "index" | "dir">, options: Partial<RelayWorkersOptions<FixtureWorkerData>> = {}) {
  const { logger, lines } = capturingLogger();
  const w = new RelayWorkers<FixtureWorkerData>({ count, script, data: (index) => ({ index, dir, ...data(index) }), logger, restartDelayMs: 10, ...options });
  started.push(w);
  const logged = (message: string) => lines.map((l) => JSON.parse(l) as { message: string; worker?: number }).filter((l) => l.message === message);
  return { w, logged };
}

const ask = (w: RelayWorkers<FixtureWorkerData>, body: FixtureRequest = {}) => w.request<FixtureReply>(body);

// Threads start in about 0.3 s each here; a loaded run gets room.
describe("RelayWorkers", { timeout: 20_000 }, () => {
  it("refuses a worker count that is not a positive integer", () => {
    const { logger } = capturingLogger();
    for (const count of [0, -1, 1.5]) expect(() => new RelayWorkers({ count, script, data: () => ({}), logger })).toThrow(/count must be a positive integer/);
  });

  it("start resolves once every worker started its relay, the slowest too", async () => {
    const { w } = workers(2, (index) => ({ held: 0, ...(index === 1 ? { startDelayMs: 400 } : {}) }));
    await w.start();
    expect([runsOf(0), runsOf(1)]).toEqual([1, 1]);
    // A worker that has not started yet is refused ("not running"): both answer at once.
    expect((await ask(w)).map((r) => r.index)).toEqual([0, 1]);
  });

  it("heldSessions sums the workers' reports, which follow what each relay holds", async () => {
    const { w } = workers(2, (index) => ({ held: [3, 5][index] ?? 0 }));
    await w.start();
    await waitFor(() => w.held(), { until: (held) => held[0] === 3 && held[1] === 5, message: "the first reports" });
    expect(w.heldSessions()).toBe(8);
    await ask(w, { setHeld: [1, 10] });
    // The periodic report (HELD_REPORT_MS) carries the change.
    await waitFor(() => w.held(), { until: (held) => held[0] === 1 && held[1] === 10, timeoutMs: 5_000, message: "the next reports" });
    expect(w.heldSessions()).toBe(11);
  });

  it("request answers in worker order, whichever answers first, and fails with a worker's error", async () => {
    const { w } = workers(3, () => ({ held: 0 }));
    await w.start();
    const replies = await ask(w, { delays: [300, 0, 100] });
    expect(replies.map((r) => [r.index, r.echo])).toEqual([0, 1, 2].map((i) => [i, { delays: [300, 0, 100] }]));
    await expect(ask(w, { failFrom: [1] })).rejects.toThrow("worker 1 refuses");
  });

  it("a worker that exits on its own is started again with the same data; its pending requests fail", async () => {
    const { w, logged } = workers(2, (index) => ({ held: 2, crashOnce: index === 1 }));
    await w.start();
    await expect(ask(w, { crash: true })).rejects.toThrow("relay worker 1 exited (1)");
    expect(logged("relay worker exited: restarting")).toMatchObject([{ worker: 1 }]);
    const replies = await waitFor(() => ask(w).catch(() => null), { timeoutMs: 10_000, message: "worker 1 to run again" });
    expect(replies.map((r) => [r.index, r.run])).toEqual([
      [0, 1],
      [1, 2],
    ]);
    expect(replies[1]?.data).toEqual({ index: 1, dir, held: 2, crashOnce: true });
    // The crash is done with (its marker): the restarted worker answers what killed the first.
    expect((await ask(w, { crash: true })).map((r) => r.run)).toEqual([1, 2]);
    await waitFor(() => w.heldSessions(), { until: (n) => n === 4, message: "the restarted worker's report" });
  });

  it("drain sums the workers' counters once all exited, and nothing restarts after it", async () => {
    const { w, logged } = workers(2, (index) => ({ held: [2, 3][index] ?? 0 }));
    await w.start();
    expect(await w.drain()).toEqual({ drains: 2, held: 5, worker0: 1, worker1: 1 });
    expect(logged("relay worker exited: restarting")).toEqual([]);
    expect(logged("relay worker did not drain in time: terminated")).toEqual([]);
    expect(w.heldSessions()).toBe(0);
    await expect(ask(w)).rejects.toThrow("relay worker 0 is not running");
  });

  it("a drain while a worker restarts waits for its relay to start, then drains it too", async () => {
    // Worker 1's second start takes 500 ms: the drain arrives while it runs.
    const { w, logged } = workers(2, (index) => ({ held: 1, ...(index === 1 ? { crashOnce: true, startDelayMs: 500, delayFromRun: 2 } : {}) }), { drainTimeoutMs: 5_000 });
    await w.start();
    await expect(ask(w, { crash: true })).rejects.toThrow("relay worker 1 exited (1)");
    await waitFor(() => runsOf(1) === 2, { message: "worker 1's second start" });
    expect(await w.drain()).toEqual({ drains: 2, held: 2, worker0: 1, worker1: 1 });
    expect(logged("relay worker did not drain in time: terminated")).toEqual([]);
  });

  it("a worker whose relay fails to start fails start() and the others are stopped", async () => {
    // Worker 1 fails after worker 0 started (and holds its thread open).
    const { w } = workers(2, (index) => ({ held: 1, ...(index === 1 ? { failStart: true, startDelayMs: 300 } : {}) }));
    await expect(w.start()).rejects.toThrow("relay worker 1: worker 1 cannot start");
    expect(runsOf(0)).toBe(1);
    // Worker 0 was terminated: it is not running any more (else only worker 1 would be refused).
    await expect(ask(w)).rejects.toThrow("relay worker 0 is not running");
  });
});
