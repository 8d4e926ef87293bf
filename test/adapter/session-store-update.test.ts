/**
 * `DynamoSessionStore.update` (a field change without a status change) against dynalite: a
 * compare-and-set on version, status and the sandbox the writer read, plus the lease when
 * guarded. A losing writer affects 0 items. Also `readLease` as the flows read it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseLostError, NotFoundError, StaleWriteError } from "../../functions/domain/errors";
import type { SessionRecord } from "../../functions/domain/session";
import type { TransitionChanges } from "../../functions/domain/session-transitions";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let store: DynamoSessionStore;
const later = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const TTL = 300;

beforeAll(async () => {
  table = await startTestTable();
  store = new DynamoSessionStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

async function stored(sessionId: string): Promise<SessionRecord> {
  const record = await store.getSession(sessionId);
  if (!record) throw new Error(`session ${sessionId} vanished`);
  return record;
}

/** A running session with sandbox `sb-1` (created, then moved to running through the store). */
async function runningSession(sandboxId: string | null = "sb-1"): Promise<SessionRecord> {
  const s = buildSession();
  await store.createSession(s);
  return store.transition(s, "running", later(1), { sandboxId });
}

async function pausedSession(sandboxId: string | null): Promise<SessionRecord> {
  const running = await runningSession("sb-1");
  return store.transition(running, "paused", later(2), { sandboxId, snapshotId: "snap-1", pauseReason: "user" });
}

describe("update: compare-and-set on version", () => {
  it("changes the fields, bumps the version, keeps the status and the status index", async () => {
    const current = await runningSession();
    const next = await store.update(current, { snapshotId: "snap-2", sandboxExpiresAt: later(3600).toISOString() }, later(10));
    expect(next).toEqual({
      ...current,
      snapshotId: "snap-2",
      sandboxExpiresAt: later(3600).toISOString(),
      updatedAt: later(10).toISOString(),
      version: current.version + 1,
    });
    expect(await stored(current.id)).toEqual(next);
    const running = await store.listSessionsByStatus("running", { limit: 1000 });
    expect(running.items.filter((i) => i.id === current.id)).toEqual([next]);
  });

  it("swaps the sandbox (expiry migration) and then refuses the writer that still holds the old one", async () => {
    const current = await runningSession("sb-old");
    const swapped = await store.update(current, { sandboxId: "sb-new", openCodeUrl: "https://tunnel.example/new" }, later(5));
    expect(await stored(current.id)).toMatchObject({ sandboxId: "sb-new", openCodeUrl: "https://tunnel.example/new", status: "running", version: current.version + 1 });
    await expect(store.update(current, { snapshotId: "snap-stale" }, later(6))).rejects.toBeInstanceOf(StaleWriteError);
    expect(await stored(current.id)).toEqual(swapped);
  });

  it("fails with StaleWriteError when the version moved, and the item is unchanged", async () => {
    const current = await runningSession();
    const first = await store.update(current, { snapshotId: "snap-a" }, later(5));
    // `current` is the copy a second, slower writer still holds.
    await expect(store.update(current, { snapshotId: "snap-b" }, later(6))).rejects.toSatisfy(
      (e: unknown) => e instanceof StaleWriteError && e.context.expectedVersion === current.version && e.context.storedVersion === first.version,
    );
    expect(await stored(current.id)).toEqual(first);
  });

  it("race: 8 concurrent updates from one read, exactly one wins and the version grows by one", async () => {
    const current = await runningSession();
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.update(current, { snapshotId: `snap-${i}` }, later(10 + i))));
    const winners = results.filter((r): r is PromiseFulfilledResult<SessionRecord> => r.status === "fulfilled");
    expect(winners).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(StaleWriteError);
    expect(await stored(current.id)).toEqual(winners[0]?.value);
    expect((await stored(current.id)).version).toBe(current.version + 1);
  });

  it("reports a missing session as NotFoundError and creates nothing", async () => {
    const ghost = buildSession({ status: "running", sandboxId: "sb-1" });
    await expect(store.update(ghost, { snapshotId: "snap" }, later(1))).rejects.toBeInstanceOf(NotFoundError);
    expect(await store.getSession(ghost.id)).toBeNull();
  });
});

describe("update: compare-and-set on the sandbox the writer read", () => {
  it("stored sandbox differs from the writer's (both non-null): StaleWriteError, item unchanged", async () => {
    const current = await runningSession("sb-1");
    await expect(store.update({ ...current, sandboxId: "sb-other" }, { snapshotId: "snap" }, later(5))).rejects.toBeInstanceOf(StaleWriteError);
    expect(await stored(current.id)).toEqual(current);
  });

  it("stored sandbox set, writer read none: StaleWriteError, item unchanged", async () => {
    const current = await runningSession("sb-1");
    await expect(store.update({ ...current, sandboxId: null }, { sandboxId: "sb-mine" }, later(5))).rejects.toBeInstanceOf(StaleWriteError);
    expect(await stored(current.id)).toEqual(current);
  });

  it("stored sandbox none, writer read one: StaleWriteError, item unchanged", async () => {
    const current = await pausedSession(null);
    expect(current.sandboxId).toBeNull();
    await expect(store.update({ ...current, sandboxId: "sb-gone" }, { snapshotId: null }, later(5))).rejects.toBeInstanceOf(StaleWriteError);
    expect(await stored(current.id)).toEqual(current);
  });

  it("stored sandbox none, writer read none: succeeds (clearing a dead memory snapshot)", async () => {
    const current = await pausedSession(null);
    const next = await store.update(current, { snapshotId: null }, later(5));
    expect(next).toMatchObject({ status: "paused", sandboxId: null, snapshotId: null, version: current.version + 1 });
    expect(await stored(current.id)).toEqual(next);
  });

  it("stored sandbox kept by a native pause, writer read the same one: succeeds", async () => {
    const current = await pausedSession("sb-paused");
    const next = await store.update(current, { sandboxExpiresAt: later(999).toISOString() }, later(5));
    expect(await stored(current.id)).toEqual(next);
    expect(next.sandboxId).toBe("sb-paused");
  });
});

describe("update never changes the status", () => {
  it("keeps the stored status on success", async () => {
    const current = await pausedSession("sb-1");
    const next = await store.update(current, { sandboxId: null, sandboxExpiresAt: null }, later(5));
    expect((await stored(current.id)).status).toBe("paused");
    expect(next.status).toBe("paused");
    const paused = await store.listSessionsByStatus("paused", { limit: 1000 });
    expect(paused.items.map((i) => i.id)).toContain(current.id);
  });

  it("a writer whose copy has another status (same version) is refused and changes nothing", async () => {
    const current = await runningSession();
    await expect(store.update({ ...current, status: "paused" }, { snapshotId: "snap" }, later(5))).rejects.toBeInstanceOf(StaleWriteError);
    expect(await stored(current.id)).toEqual(current);
  });

  // TypeScript lets a wider object through when it is not a literal; the store strips every key
  // outside TRANSITION_CHANGE_FIELDS so a status never moves past the transition table.
  it("ignores a status smuggled in through a wider changes object", async () => {
    const current = await runningSession();
    const wider = { snapshotId: "snap", status: "stopped" as const };
    const changes: TransitionChanges = wider;
    await store.update(current, changes, later(5)).catch(() => undefined);
    expect((await stored(current.id)).status).toBe("running");
  });
});

describe("update with a lease guard", () => {
  it("commits while the guard's lease is held", async () => {
    const current = await runningSession();
    const lease = await store.acquireLease(current.id, "flow-a", later(2), TTL);
    const next = await store.update(current, { snapshotId: "snap-held" }, later(3), lease);
    expect(await stored(current.id)).toEqual(next);
  });

  it("a taken-over lease: LeaseLostError, item unchanged", async () => {
    const current = await runningSession();
    const stale = await store.acquireLease(current.id, "flow-old", later(2), TTL);
    const fresh = await store.acquireLease(current.id, "flow-new", later(2 + TTL + 1), TTL);
    expect(fresh.fence).toBeGreaterThan(stale.fence);
    await expect(store.update(current, { sandboxId: "sb-stale" }, later(TTL + 10), stale)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await stored(current.id)).toEqual(current);
  });

  it("a released lease, or the right owner with an old fence: LeaseLostError, item unchanged", async () => {
    const current = await runningSession();
    const first = await store.acquireLease(current.id, "flow", later(2), TTL);
    await store.releaseLease(first);
    await expect(store.update(current, { snapshotId: "snap-x" }, later(3), first)).rejects.toBeInstanceOf(LeaseLostError);
    const second = await store.acquireLease(current.id, "flow", later(4), TTL);
    expect(second.fence).toBe(first.fence + 1);
    await expect(store.update(current, { snapshotId: "snap-y" }, later(5), first)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await stored(current.id)).toEqual(current);
  });

  it("a lost lease is reported as LeaseLostError even when the version moved too", async () => {
    const current = await runningSession();
    const stale = await store.acquireLease(current.id, "flow-old", later(2), TTL);
    const fresh = await store.acquireLease(current.id, "flow-new", later(2 + TTL + 1), TTL);
    const moved = await store.update(current, { snapshotId: "snap-fresh" }, later(TTL + 5), fresh);
    await expect(store.update(current, { snapshotId: "snap-stale" }, later(TTL + 6), stale)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await stored(current.id)).toEqual(moved);
  });
});

describe("update and touchActivity", () => {
  it("a touch between read and update does not make the update stale, and the update keeps the touch", async () => {
    const current = await runningSession();
    await store.touchActivity(current.id, later(50));
    const next = await store.update(current, { snapshotId: "snap-after-touch" }, later(60));
    const after = await stored(current.id);
    expect(after).toMatchObject({ snapshotId: "snap-after-touch", version: current.version + 1, lastActivityAt: later(50).toISOString() });
    expect(after).toEqual({ ...next, lastActivityAt: later(50).toISOString() });
  });
});

describe("readLease", () => {
  it("free before any lease, held while acquired, {owner: null, fence: N} after release", async () => {
    const s = buildSession();
    await store.createSession(s);
    expect(await store.readLease(s.id)).toEqual({ owner: null, fence: 0, expiresAt: null });
    const lease = await store.acquireLease(s.id, "flow-1", later(0), TTL);
    expect(await store.readLease(s.id)).toEqual({ owner: "flow-1", fence: 1, expiresAt: lease.expiresAt });
    await store.releaseLease(lease);
    expect(await store.readLease(s.id)).toEqual({ owner: null, fence: 1, expiresAt: null });
    const again = await store.acquireLease(s.id, "flow-2", later(1), TTL);
    await store.releaseLease(again);
    expect(await store.readLease(s.id)).toEqual({ owner: null, fence: 2, expiresAt: null });
  });

  it("null for an unknown session", async () => {
    expect(await store.readLease(buildSession().id)).toBeNull();
  });
});
