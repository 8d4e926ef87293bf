/**
 * The relay lease (store/dynamo-relay-store.ts) against dynalite with real concurrent claimers,
 * and its independence from the flow lease and from lifecycle writes on the same item.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseLostError, NotFoundError, ValidationError } from "../../functions/domain/errors";
import type { SessionRecord } from "../../functions/domain/session";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let sessions: DynamoSessionStore;
let leases: DynamoRelayLeaseStore;
const TTL = 30;
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

beforeAll(async () => {
  table = await startTestTable();
  sessions = new DynamoSessionStore(table.doc, table.tableName);
  leases = new DynamoRelayLeaseStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

async function running(overrides: Partial<SessionRecord> = {}): Promise<SessionRecord> {
  const s = buildSession({ status: "running", sandboxId: "sb-1", openCodeUrl: "http://oc.invalid", codingAgentSessionId: "ses_agent", ...overrides });
  await sessions.createSession(s);
  return s;
}

describe("claim", () => {
  it("race: 8 concurrent claimers, exactly one wins; the others get null", async () => {
    const s = await running();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => leases.claim(s.id, `relay-${i}`, at(0), TTL)));
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    expect(winners[0]).toMatchObject({ sessionId: s.id, fence: 1, expiresAt: at(TTL).getTime() });
    // The loser sees it held until expiry.
    const loser = `relay-${results.findIndex((r) => r === null)}`;
    expect(await leases.claim(s.id, loser, at(TTL - 1), TTL)).toBeNull();
  });

  it("an expired lease is taken over with a larger fence; the stale owner cannot renew, and its release is a no-op", async () => {
    const s = await running();
    const a = await leases.claim(s.id, "relay-a", at(0), TTL);
    if (!a) throw new Error("relay-a did not claim a free lease");
    expect(await leases.claim(s.id, "relay-b", at(TTL - 1), TTL)).toBeNull();
    const b = await leases.claim(s.id, "relay-b", at(TTL + 1), TTL);
    expect(b?.fence).toBeGreaterThan(a.fence);

    await expect(leases.renew(a, at(TTL + 2), TTL)).rejects.toBeInstanceOf(LeaseLostError);
    await leases.release(a);
    // relay-b still holds it: a third relay cannot claim before b's expiry.
    expect(await leases.claim(s.id, "relay-c", at(TTL + 3), TTL)).toBeNull();
  });

  it("renew extends the lease; release frees it at once, and the fence keeps growing", async () => {
    const s = await running();
    const a = await leases.claim(s.id, "relay-a", at(0), TTL);
    if (!a) throw new Error("no lease");
    const renewed = await leases.renew(a, at(20), TTL);
    expect(renewed.expiresAt).toBe(at(20 + TTL).getTime());
    expect(await leases.claim(s.id, "relay-b", at(TTL + 1), TTL)).toBeNull();
    await leases.release(renewed);
    const b = await leases.claim(s.id, "relay-b", at(TTL + 2), TTL);
    expect(b?.fence).toBe(a.fence + 1);
  });

  it("a claim by the current owner succeeds again (restart with the same id)", async () => {
    const s = await running();
    const first = await leases.claim(s.id, "relay-a", at(0), TTL);
    const again = await leases.claim(s.id, "relay-a", at(1), TTL);
    expect(again?.fence).toBe((first?.fence ?? 0) + 1);
  });

  it("an unknown session is NotFoundError, and no half item is created", async () => {
    await expect(leases.claim("ses_zzzzzzzzzzzzzzzzzzzzzzzzzz", "relay-a", at(0), TTL)).rejects.toBeInstanceOf(NotFoundError);
    expect(await sessions.getSession("ses_zzzzzzzzzzzzzzzzzzzzzzzzzz")).toBeNull();
  });
});

describe("seize (an idle snapshot takes the stream away, seed 002 constraint 12)", () => {
  it("takes a live lease from its holder with a larger fence: the holder's renew fails, no relay can claim until it is released", async () => {
    const s = await running();
    const holder = await leases.claim(s.id, "relay-a", at(0), TTL);
    if (!holder) throw new Error("relay-a did not claim a free lease");
    const flow = await leases.seize(s.id, "flow:idle-snapshot-1", at(1), 300);
    expect(flow.fence).toBeGreaterThan(holder.fence);
    await expect(leases.renew(holder, at(2), TTL)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await leases.claim(s.id, "relay-b", at(TTL + 1), TTL)).toBeNull();
    expect(await leases.watched(s.id, at(2))).toBe(true);
    await leases.release(flow);
    expect(await leases.claim(s.id, "relay-b", at(3), TTL)).not.toBeNull();
  });

  it("an unknown session is NotFoundError and no half item is created", async () => {
    const id = buildSession().id;
    await expect(leases.seize(id, "flow:x", at(0), 300)).rejects.toBeInstanceOf(NotFoundError);
    expect(await sessions.getSession(id)).toBeNull();
  });
});

describe("independence from the flow lease and lifecycle writes", () => {
  it("a flow lease and a relay lease are held at once; lifecycle writes keep the relay lease", async () => {
    const s = await running();
    const relay = await leases.claim(s.id, "relay-a", at(0), TTL);
    if (!relay) throw new Error("no relay lease");
    const flow = await sessions.acquireLease(s.id, "flow-1", at(1), 300);
    const paused = await sessions.transition(s, "paused", at(2), { snapshotId: "snap-1", sandboxId: null }, flow);
    await sessions.releaseLease(flow);
    await sessions.touchActivity(s.id, at(3));
    expect(paused.status).toBe("paused");
    // Still relay-a's: renewable, and not claimable by another relay.
    await expect(leases.renew(relay, at(4), TTL)).resolves.toMatchObject({ fence: relay.fence });
    expect(await leases.claim(s.id, "relay-b", at(5), TTL)).toBeNull();
    // And the flow lease's fence did not move with the relay's.
    expect(await sessions.readLease(s.id)).toMatchObject({ owner: null, fence: 1 });
  });
});

describe("listClaimable", () => {
  it("lists running sessions with a free or expired relay lease, across pages, and nothing else", async () => {
    const free = await running();
    const expired = await running();
    const held = await running();
    const paused = buildSession({ status: "paused", snapshotId: "snap-1" });
    await sessions.createSession(paused);
    await leases.claim(expired.id, "relay-x", at(0), TTL);
    await leases.claim(held.id, "relay-y", at(100), TTL);

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await leases.listClaimable(at(100), { limit: 2, cursor });
      seen.push(...page.sessionIds);
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 50);
    expect(cursor).toBeNull();
    expect(seen).toEqual(expect.arrayContaining([free.id, expired.id]));
    expect(seen).not.toContain(held.id);
    expect(seen).not.toContain(paused.id);
  });

  it("rejects a cursor it did not mint", async () => {
    const foreign = Buffer.from(JSON.stringify({ PK: "SESSION#x", SK: "SESSION", GSI2PK: "STATUS#paused", GSI2SK: "x" })).toString("base64url");
    for (const cursor of [foreign, "not-a-cursor"]) {
      await expect(leases.listClaimable(at(0), { limit: 10, cursor })).rejects.toBeInstanceOf(ValidationError);
    }
  });
});
