/**
 * The session lease (ARCHITECTURE.md §1: owner, expiry, monotonic fence) against dynalite with
 * real concurrent actors: the invariants issue 4's flows and issue 5's relay rely on.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseBusyError, LeaseLostError, NotFoundError } from "../../functions/domain/errors";
import type { Lease } from "../../functions/ports/session-store";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let store: DynamoSessionStore;
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const TTL = 300;

beforeAll(async () => {
  table = await startTestTable();
  store = new DynamoSessionStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

async function newSession() {
  const s = buildSession({ status: "paused", snapshotId: "snap-1" });
  await store.createSession(s);
  return s;
}

describe("acquire", () => {
  it("race: 10 concurrent acquirers, exactly one holds the lease", async () => {
    const s = await newSession();
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.acquireLease(s.id, `flow-${i}`, at(0), TTL)));
    const won = results.filter((r): r is PromiseFulfilledResult<Lease> => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(LeaseBusyError);
    expect(won[0]?.value.fence).toBe(1);
  });

  it("an expired lease is taken over with a larger fence; a live one is not", async () => {
    const s = await newSession();
    const a = await store.acquireLease(s.id, "flow-a", at(0), TTL);
    await expect(store.acquireLease(s.id, "flow-b", at(TTL - 1), TTL)).rejects.toBeInstanceOf(LeaseBusyError);
    const b = await store.acquireLease(s.id, "flow-b", at(TTL + 1), TTL);
    expect(b.fence).toBeGreaterThan(a.fence);
  });

  it("the fence only grows, across release and re-acquire", async () => {
    const s = await newSession();
    const fences: number[] = [];
    for (let i = 0; i < 4; i++) {
      const lease = await store.acquireLease(s.id, `flow-${i}`, at(i), TTL);
      fences.push(lease.fence);
      await store.releaseLease(lease);
    }
    expect(fences).toEqual([1, 2, 3, 4]);
  });

  it("unknown session: NotFoundError", async () => {
    await expect(store.acquireLease("ses_zzzzzzzzzzzzzzzzzzzzzzzzzz", "f", at(0), TTL)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("a stale holder (lease expired and taken over)", () => {
  it("cannot renew, cannot release the new lease, fails verification, and its guarded commit affects 0 items", async () => {
    const s = await newSession();
    const stale = await store.acquireLease(s.id, "flow-old", at(0), TTL);
    const fresh = await store.acquireLease(s.id, "flow-new", at(TTL + 1), TTL);

    await expect(store.renewLease(stale, at(TTL + 2), TTL)).rejects.toBeInstanceOf(LeaseLostError);
    // seed 002 verification 17: destructive steps check ownership first.
    await expect(store.verifyLease(stale, at(TTL + 2))).rejects.toBeInstanceOf(LeaseLostError);
    await store.releaseLease(stale); // no-op
    await expect(store.verifyLease(fresh, at(TTL + 2))).resolves.toBeUndefined();

    // seed 002 verification 18: the stale flow's commit affects 0 items.
    const current = await store.getSession(s.id);
    if (!current) throw new Error("missing");
    await expect(store.transition(current, "running", at(TTL + 3), { sandboxId: "sb-stale" }, stale)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await store.getSession(s.id)).toEqual(current);

    const committed = await store.transition(current, "running", at(TTL + 4), { sandboxId: "sb-fresh" }, fresh);
    expect(committed.sandboxId).toBe("sb-fresh");
  });

  it("a holder whose lease simply expired fails verification even before anyone takes over", async () => {
    const s = await newSession();
    const lease = await store.acquireLease(s.id, "flow", at(0), TTL);
    await expect(store.verifyLease(lease, at(TTL - 1))).resolves.toBeUndefined();
    await expect(store.verifyLease(lease, at(TTL))).rejects.toBeInstanceOf(LeaseLostError);
  });
});

describe("renew and release", () => {
  it("renewal keeps a long operation's lease alive past the original expiry", async () => {
    const s = await newSession();
    let lease = await store.acquireLease(s.id, "relay-1", at(0), TTL);
    lease = await store.renewLease(lease, at(TTL - 10), TTL);
    await expect(store.acquireLease(s.id, "relay-2", at(TTL + 10), TTL)).rejects.toBeInstanceOf(LeaseBusyError);
    await expect(store.verifyLease(lease, at(TTL + 10))).resolves.toBeUndefined();
  });

  it("a lease does not bump the session version: lifecycle writers are not made stale by it", async () => {
    const s = await newSession();
    const lease = await store.acquireLease(s.id, "flow", at(0), TTL);
    const next = await store.transition(s, "running", at(1), { sandboxId: "sb" }, lease);
    expect(next.version).toBe(s.version + 1);
    await store.releaseLease(lease);
    await expect(store.acquireLease(s.id, "other", at(2), TTL)).resolves.toMatchObject({ owner: "other" });
  });
});

describe("issue 15: writes that return the item, so nobody reads it again", () => {
  it("acquireLeaseWithSession returns the session as the lease write left it; busy and missing as acquireLease", async () => {
    const s = await newSession();
    await store.touchActivity(s.id, at(5));
    const { lease, session } = await store.acquireLeaseWithSession(s.id, "flow-a", at(10), TTL);
    expect(lease).toMatchObject({ owner: "flow-a", fence: 1 });
    expect(session).toMatchObject({ id: s.id, status: "paused", lastActivityAt: at(5).toISOString(), version: s.version });
    await expect(store.acquireLeaseWithSession(s.id, "flow-b", at(11), TTL)).rejects.toBeInstanceOf(LeaseBusyError);
    await expect(store.acquireLeaseWithSession("ses_missing", "flow-b", at(11), TTL)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a commit with release frees the lease in the same write and returns the stored record, fields it did not set included", async () => {
    const s = await newSession();
    const { lease, session } = await store.acquireLeaseWithSession(s.id, "flow-a", at(0), TTL);
    // Activity lands after the flow read the session (it does not bump the version).
    await store.touchActivity(s.id, at(20));
    const next = await store.transition(session, "running", at(30), { sandboxId: "sb-1", openCodeUrl: "http://x", snapshotId: null }, { ...lease, release: true });
    expect(next).toMatchObject({ status: "running", sandboxId: "sb-1", lastActivityAt: at(20).toISOString() });
    expect(await store.readLease(s.id)).toEqual({ owner: null, fence: lease.fence, expiresAt: null });
    const read = await store.getSessionWithLease(s.id);
    expect(read?.session).toEqual(next);
    expect(read?.lease).toEqual({ owner: null, fence: lease.fence, expiresAt: null });
  });

  it("a stale holder's commit with release changes nothing, the successor's lease included", async () => {
    const s = await newSession();
    const a = await store.acquireLeaseWithSession(s.id, "flow-a", at(0), TTL);
    const b = await store.acquireLease(s.id, "flow-b", at(TTL + 1), TTL);
    await expect(store.transition(a.session, "running", at(TTL + 2), { sandboxId: "sb-a" }, { ...a.lease, release: true })).rejects.toBeInstanceOf(LeaseLostError);
    expect(await store.readLease(s.id)).toMatchObject({ owner: "flow-b", fence: b.fence });
    expect((await store.getSession(s.id))?.status).toBe("paused");
  });

  it("touchActivityReturning returns the session and lease after the touch, and the stored ones when a newer touch won", async () => {
    const s = await newSession();
    const lease = await store.acquireLease(s.id, "flow-a", at(0), TTL);
    const touched = await store.touchActivityReturning(s.id, at(40));
    expect(touched.session.lastActivityAt).toBe(at(40).toISOString());
    expect(touched.lease).toMatchObject({ owner: "flow-a", fence: lease.fence });
    const older = await store.touchActivityReturning(s.id, at(30));
    expect(older.session.lastActivityAt).toBe(at(40).toISOString());
    await expect(store.touchActivityReturning("ses_missing", at(1))).rejects.toBeInstanceOf(NotFoundError);
  });
});
