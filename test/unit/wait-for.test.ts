/** The one polling helper (test/support/wait-for.ts) and the seeded randomness of the test suites. */
import { describe, expect, it } from "vitest";
import { seededRandom, shuffled, testSeed } from "../support/seeded-random";
import { waitFor } from "../support/wait-for";

describe("waitFor", () => {
  it("returns the first truthy value of the probe", async () => {
    let calls = 0;
    await expect(waitFor(() => (++calls >= 3 ? `after ${calls}` : null), { intervalMs: 1 })).resolves.toBe("after 3");
  });

  it("with `until`, returns the first value it accepts, falsy or not", async () => {
    let n = 3;
    await expect(waitFor(() => --n, { until: (v) => v === 0, intervalMs: 1 })).resolves.toBe(0);
  });

  it("times out naming what it waited for, and the last value when `until` judged it", async () => {
    await expect(waitFor(() => false, { timeoutMs: 20, intervalMs: 1, message: "the door" })).rejects.toThrow(/^timed out after 20 ms waiting for the door$/);
    await expect(waitFor(() => ({ status: "running" }), { until: (s) => s.status === "paused", timeoutMs: 20, intervalMs: 1, message: (s) => `a pause (now ${s.status})` })).rejects.toThrow(
      'timed out after 20 ms waiting for a pause (now running); last value {"status":"running"}',
    );
  });

  it("a probe that throws fails the wait at once", async () => {
    let calls = 0;
    const probe = () => {
      calls++;
      throw new Error("broken probe");
    };
    await expect(waitFor(probe, { timeoutMs: 5_000 })).rejects.toThrow("broken probe");
    expect(calls).toBe(1);
  });
});

describe("seeded randomness", () => {
  it("the same seed gives the same sequence and the same shuffles; another seed does not", () => {
    const draw = (seed: number) => Array.from({ length: 5 }, seededRandom(seed));
    expect(draw(42)).toEqual(draw(42));
    expect(draw(42)).not.toEqual(draw(43));
    expect(draw(42).every((x) => x >= 0 && x < 1)).toBe(true);
    const items = ["a", "b", "c", "d", "e", "f"];
    expect(shuffled(items, seededRandom(7))).toEqual(shuffled(items, seededRandom(7)));
    expect([...shuffled(items, seededRandom(7))].sort()).toEqual(items);
  });

  it("the seed comes from the named variable (to replay), else is fresh; a bad one is refused naming the variable", () => {
    expect(testSeed("SEED", { SEED: "123" })).toBe(123);
    expect(testSeed("SEED", { SEED: " 4294967295 " })).toBe(4294967295);
    expect(Number.isInteger(testSeed("SEED", {}))).toBe(true);
    for (const bad of ["abc", "-1", "1.5", "4294967296"]) expect(() => testSeed("SEED", { SEED: bad })).toThrow(/SEED must be an integer from 0 to 4294967295/);
  });
});
