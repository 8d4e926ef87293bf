/**
 * The relays of one process telling each other what they hold (functions/relay/workers.ts,
 * `siblingsChannel` over a real BroadcastChannel, as between worker threads) and the share a
 * scan claims first (`shareOf`).
 */
import { afterEach, describe, expect, it } from "vitest";
import { shareOf, siblingsChannel } from "../../functions/relay/workers";
import { waitFor } from "../support/wait-for";

const open: { close(): void }[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.close();
});

let names = 0;
function channels(count: number) {
  const name = `relay-siblings-test-${process.pid}-${names++}`;
  const make = (index: number) => {
    const c = siblingsChannel(index, count, name);
    open.push(c);
    return c;
  };
  return { name, make, all: Array.from({ length: count }, (_, i) => make(i)) };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("relay siblings", () => {
  it("tells the others which sessions a relay holds and drops, never itself", async () => {
    const { all } = channels(3);
    const [a, b, c] = all;
    if (!a || !b || !c) throw new Error("three channels");
    a.holds("ses_1");
    b.holds("ses_2");
    await waitFor(() => b.heldElsewhere("ses_1") && c.heldElsewhere("ses_1") && a.heldElsewhere("ses_2") && c.heldElsewhere("ses_2"), { message: "the holds to reach the siblings" });
    // What a relay says itself is not "elsewhere".
    expect(a.heldElsewhere("ses_1")).toBe(false);
    expect(b.heldElsewhere("ses_2")).toBe(false);

    a.dropped("ses_1");
    await waitFor(() => !b.heldElsewhere("ses_1") && !c.heldElsewhere("ses_1"), { message: "the drop to reach the siblings" });
    expect(c.heldElsewhere("ses_2")).toBe(true);
  });

  it("a drop by a relay that no longer held the session leaves the new holder's claim alone", async () => {
    const { all } = channels(3);
    const [a, b, c] = all;
    if (!a || !b || !c) throw new Error("three channels");
    a.holds("ses_1");
    await waitFor(() => c.heldElsewhere("ses_1"), { message: "a's hold" });
    // b took it over (a new runtime, a takeover) and a says it let go afterwards.
    b.holds("ses_1");
    await tick();
    a.dropped("ses_1");
    await tick();
    expect(c.heldElsewhere("ses_1")).toBe(true);
    b.dropped("ses_1");
    await waitFor(() => !c.heldElsewhere("ses_1"), { message: "b's drop" });
  });

  it("a restarted relay makes the others forget what its earlier run held", async () => {
    const { all, make } = channels(2);
    const [a, b] = all;
    if (!a || !b) throw new Error("two channels");
    a.holds("ses_1");
    a.holds("ses_2");
    b.holds("ses_3");
    await waitFor(() => b.heldElsewhere("ses_1") && b.heldElsewhere("ses_2") && a.heldElsewhere("ses_3"), { message: "the holds" });
    // Worker 0 died (its streams with it) and starts again: same index, nothing held.
    a.close();
    const again = make(0);
    await waitFor(() => !b.heldElsewhere("ses_1") && !b.heldElsewhere("ses_2"), { message: "the restart's reset" });
    // Only its own index is forgotten.
    await tick();
    expect(again.heldElsewhere("ses_3")).toBe(false); // a new run has heard nothing yet
    b.holds("ses_4");
    await waitFor(() => again.heldElsewhere("ses_4"), { message: "b's hold to reach the new run" });
  });

  it("splits sessions into shares: every session in exactly one, all shares used, the same answer everywhere", () => {
    const ids = Array.from({ length: 4000 }, (_, i) => `ses_${i.toString(36)}_${(i * 7919).toString(16)}`);
    const count = 4;
    const counts = new Array<number>(count).fill(0);
    for (const id of ids) {
      const share = shareOf(id, count);
      expect(share).toBeGreaterThanOrEqual(0);
      expect(share).toBeLessThan(count);
      expect(shareOf(id, count)).toBe(share);
      counts[share] = (counts[share] ?? 0) + 1;
    }
    // Roughly even (FNV-1a): each share within 15% of a quarter.
    for (const n of counts) expect(Math.abs(n - ids.length / count)).toBeLessThan((ids.length / count) * 0.15);
    const { all } = channels(count);
    for (const id of ids.slice(0, 200)) expect(all.filter((c) => c.mine(id))).toHaveLength(1);
    expect(shareOf("anything", 1)).toBe(0);
  });
});
