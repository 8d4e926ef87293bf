/**
 * Relay ownership (store/dynamo-relay-store.ts, issue 15) against dynalite with real concurrent
 * claimers: heartbeats (epochs never revive), claims naming relay + epoch + sandbox, takeover
 * only once the named heartbeat is dead, the seize, and independence from the flow lease and
 * lifecycle writes on the same item.
 */
import { UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseLostError, NotFoundError, ValidationError } from "../../functions/domain/errors";
import type { SessionRecord } from "../../functions/domain/session";
import type { ClaimablePage, ClaimView, RelayHeartbeat } from "../../functions/ports/relay";
import { DynamoRelayLeaseStore, RELAY_CLOCK_SKEW_MARGIN_MS } from "../../functions/store/dynamo-relay-store";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { keys } from "../../functions/store/table-layout";
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

async function view(id: string): Promise<ClaimView> {
  const v = await leases.view(id);
  if (!v) throw new Error(`no session ${id}`);
  return v;
}

async function claim(id: string, hb: RelayHeartbeat, now: Date) {
  return leases.claim(await view(id), hb, now);
}

/** A listing page's session ids. */
const ids = (page: ClaimablePage) => page.sessions.map((v) => v.sessionId);

let relayN = 0;
const relayName = (n: string) => `${n}-${++relayN}`;

describe("heartbeat", () => {
  it("register gives a new epoch each time; beat extends it; an expired or retired epoch never beats again", async () => {
    const owner = relayName("relay-h");
    const first = await leases.register(owner, at(0), TTL);
    const second = await leases.register(owner, at(1), TTL);
    expect(second.epoch).toBe(first.epoch + 1);
    // The older epoch is not the registered one any more.
    await expect(leases.beat(first, at(2), TTL)).rejects.toBeInstanceOf(LeaseLostError);
    const beaten = await leases.beat(second, at(20), TTL);
    expect(beaten.expiresAt).toBe(at(20 + TTL).getTime());
    expect((await leases.liveRelays(at(21))).get(owner)).toBe(second.epoch);
    // Past its expiry it stays dead, even if it tries.
    await expect(leases.beat(beaten, at(20 + TTL + 1), TTL)).rejects.toBeInstanceOf(LeaseLostError);
    expect((await leases.liveRelays(at(20 + TTL + 1))).has(owner)).toBe(false);
    const third = await leases.register(owner, at(100), TTL);
    await leases.retire(third);
    expect((await leases.liveRelays(at(101))).has(owner)).toBe(false);
    await expect(leases.beat(third, at(101), TTL)).rejects.toBeInstanceOf(LeaseLostError);
  });
});

describe("claim", () => {
  it("race: 8 relays claim concurrently, exactly one wins; the others get null while it lives", async () => {
    const s = await running();
    const hbs = await Promise.all(Array.from({ length: 8 }, (_, i) => leases.register(relayName(`relay-${i}`), at(0), TTL)));
    const seen = await view(s.id);
    const results = await Promise.all(hbs.map((hb) => leases.claim(seen, hb, at(0))));
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    expect(winners[0]).toMatchObject({ sessionId: s.id, fence: 1, sandboxId: "sb-1" });
    const loser = hbs[results.findIndex((r) => r === null)];
    if (!loser) throw new Error("no loser");
    expect(await claim(s.id, loser, at(TTL - 1))).toBeNull();
    expect(await leases.view(s.id)).toMatchObject({ relayOwner: winners[0]?.owner, relayEpoch: winners[0]?.epoch, relaySandbox: "sb-1" });
  });

  it("takeover only once the named relay's heartbeat expired, with a larger fence; the dead relay's release is a no-op", async () => {
    const s = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    const held = await claim(s.id, a, at(0));
    if (!held) throw new Error("relay-a did not claim a free session");
    expect(await claim(s.id, b, at(TTL - 1))).toBeNull();
    expect(await leases.watched(s.id, at(TTL - 1))).toBe(true);
    // a's heartbeat runs out (nothing per session was ever renewed).
    expect(await leases.watched(s.id, at(TTL + 1))).toBe(false);
    const bLater = await leases.register(b.owner, at(TTL + 1), TTL);
    const taken = await claim(s.id, bLater, at(TTL + 1));
    expect(taken?.fence).toBeGreaterThan(held.fence);
    await leases.releaseClaim(held);
    expect(await leases.view(s.id)).toMatchObject({ relayOwner: b.owner, relayEpoch: bLater.epoch });
  });

  it("clock skew: a heartbeat just past its expiry (within the margin) still holds its sessions; past the margin they are claimable", async () => {
    const s = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    if (!(await claim(s.id, a, at(0)))) throw new Error("relay-a did not claim a free session");
    // b's clock runs ahead: by it, a expired a moment ago, while a (behind) may still be streaming.
    const justPast = new Date(a.expiresAt + RELAY_CLOCK_SKEW_MARGIN_MS - 1);
    expect((await leases.liveRelays(justPast)).get(a.owner)).toBe(a.epoch);
    expect(await leases.watched(s.id, justPast)).toBe(true);
    expect(ids(await leases.listClaimable(justPast, { limit: 100 }))).not.toContain(s.id);
    expect(await claim(s.id, b, justPast)).toBeNull();
    // The owner itself cannot renew past its expiry (no margin on its side).
    await expect(leases.beat(a, new Date(a.expiresAt), TTL)).rejects.toBeInstanceOf(LeaseLostError);
    const past = new Date(a.expiresAt + RELAY_CLOCK_SKEW_MARGIN_MS);
    expect((await leases.liveRelays(past)).has(a.owner)).toBe(false);
    expect(await leases.watched(s.id, past)).toBe(false);
    const bLater = await leases.beat(b, new Date(b.expiresAt - 1), TTL);
    expect(await claim(s.id, bLater, past)).toMatchObject({ owner: b.owner });
  });

  it("a claim returns the session as its write left it: the runtime to stream from, no read after it", async () => {
    const s = await running({ openCodeUrl: "http://oc-claimed.invalid", codingAgentSessionId: "ses_claimed" });
    const hb = await leases.register(relayName("relay-w"), at(0), TTL);
    const claimed = await claim(s.id, hb, at(0));
    expect(claimed?.session).toEqual({ ...(await view(s.id)), relayOwner: hb.owner, relayEpoch: hb.epoch, relaySandbox: "sb-1" });
    expect(claimed?.session).toMatchObject({ status: "running", sandboxId: "sb-1", openCodeUrl: "http://oc-claimed.invalid", codingAgentSessionId: "ses_claimed", relayFence: claimed?.fence });
  });

  it("a claim written from a stale read fails: someone claimed in between", async () => {
    const s = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    const stale = await view(s.id);
    expect(await leases.claim(stale, a, at(0))).not.toBeNull();
    expect(await leases.claim(stale, b, at(0))).toBeNull();
  });

  it("a retired relay's sessions are claimable at once; a relay's own older epoch too", async () => {
    const s1 = await running();
    const s2 = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    await claim(s1.id, a, at(0));
    await claim(s2.id, a, at(0));
    await leases.retire(a);
    expect(await claim(s1.id, b, at(1))).not.toBeNull();
    const aAgain = await leases.register(a.owner, at(2), TTL);
    expect(await claim(s2.id, aAgain, at(2))).toMatchObject({ epoch: aAgain.epoch });
  });

  it("a claim is for one sandbox: after a resume on another sandbox the session is claimable, and unwatched until then", async () => {
    const s = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    await claim(s.id, a, at(0));
    const stored = await sessions.getSession(s.id);
    if (!stored) throw new Error("gone");
    await sessions.update(stored, { sandboxId: "sb-2" }, at(1));
    expect(await leases.watched(s.id, at(1))).toBe(false);
    expect(await claim(s.id, b, at(1))).toMatchObject({ sandboxId: "sb-2" });
    expect(await leases.watched(s.id, at(1))).toBe(true);
  });

  it("a session that is not running is never claimed", async () => {
    const paused = buildSession({ status: "paused", snapshotId: "snap-1" });
    await sessions.createSession(paused);
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    expect(await claim(paused.id, a, at(0))).toBeNull();
    expect(await leases.view("ses_zzzzzzzzzzzzzzzzzzzzzzzzzz")).toBeNull();
  });
});

describe("seize (an idle snapshot takes the stream away, seed 002 constraint 12)", () => {
  it("takes the session from a live relay with a larger fence; no relay can claim until it is released", async () => {
    const s = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    const holder = await claim(s.id, a, at(0));
    if (!holder) throw new Error("relay-a did not claim a free session");
    const flow = await leases.seize(s.id, "flow:idle-snapshot-1", at(1), 300);
    expect(flow.fence).toBeGreaterThan(holder.fence);
    // The holder sees it is not its any more (what its revalidation reads).
    expect(await leases.view(s.id)).toMatchObject({ relayOwner: "flow:idle-snapshot-1", relayFence: flow.fence });
    expect(await claim(s.id, b, at(2))).toBeNull();
    expect(await leases.watched(s.id, at(2))).toBe(true);
    await leases.releaseClaim(holder);
    expect(await leases.view(s.id)).toMatchObject({ relayOwner: "flow:idle-snapshot-1" });
    await leases.release(flow);
    expect(await claim(s.id, b, at(3))).not.toBeNull();
  });

  it("an unknown session is NotFoundError and no half item is created", async () => {
    const id = buildSession().id;
    await expect(leases.seize(id, "flow:x", at(0), 300)).rejects.toBeInstanceOf(NotFoundError);
    expect(await sessions.getSession(id)).toBeNull();
  });
});

describe("independence from the flow lease and lifecycle writes", () => {
  it("a flow lease and a relay claim are held at once; lifecycle writes keep the claim", async () => {
    const s = await running();
    const a = await leases.register(relayName("relay-a"), at(0), TTL);
    const b = await leases.register(relayName("relay-b"), at(0), TTL);
    const relay = await claim(s.id, a, at(0));
    if (!relay) throw new Error("no relay claim");
    const flow = await sessions.acquireLease(s.id, "flow-1", at(1), 300);
    await sessions.touchActivity(s.id, at(3));
    await sessions.releaseLease(flow);
    expect(await leases.view(s.id)).toMatchObject({ relayOwner: a.owner, relayEpoch: a.epoch, relayFence: relay.fence });
    expect(await claim(s.id, b, at(5))).toBeNull();
    expect(await sessions.readLease(s.id)).toMatchObject({ owner: null, fence: 1 });
  });
});

describe("listClaimable", () => {
  it("lists running sessions nobody live watches (free, dead relay, other sandbox), across pages, and nothing else", async () => {
    const free = await running();
    const deadRelay = await running();
    const held = await running();
    const paused = buildSession({ status: "paused", snapshotId: "snap-1" });
    await sessions.createSession(paused);
    const x = await leases.register(relayName("relay-x"), at(0), TTL);
    await claim(deadRelay.id, x, at(0));
    const y = await leases.register(relayName("relay-y"), at(100), TTL);
    await claim(held.id, y, at(100));

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await leases.listClaimable(at(100), { limit: 2, cursor });
      seen.push(...ids(page));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 50);
    expect(cursor).toBeNull();
    expect(seen).toEqual(expect.arrayContaining([free.id, deadRelay.id]));
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

describe("listHeldBy (a takeover reads the dead relay's sessions only: GSI3, keyed on relayOwner)", () => {
  it("lists the running sessions naming the relay under a dead epoch, across pages; not its live epoch's, not another relay's, not one no longer running", async () => {
    const owner = relayName("relay-z");
    const old = await leases.register(owner, at(0), TTL);
    const oldEpoch = await Promise.all([running(), running(), running()]);
    for (const s of oldEpoch) expect(await claim(s.id, old, at(0))).not.toBeNull();
    // Stopped while the relay still named it: still in the index, never listed.
    const stopped = await running();
    await claim(stopped.id, old, at(0));
    await table.doc.send(new UpdateCommand({ TableName: table.tableName, Key: keys.session(stopped.id), UpdateExpression: "SET #status = :stopped", ExpressionAttributeNames: { "#status": "status" }, ExpressionAttributeValues: { ":stopped": "stopped" } }));
    // The same owner restarted (a new epoch) and holds one session live; another relay holds one.
    const current = await leases.register(owner, at(100), TTL);
    const live = await running();
    await claim(live.id, current, at(100));
    const other = await leases.register(relayName("relay-o"), at(0), TTL);
    const others = await running();
    await claim(others.id, other, at(0));
    const free = await running();

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await leases.listHeldBy(owner, at(100), { limit: 2, cursor });
      seen.push(...ids(page));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 50);
    expect(cursor).toBeNull();
    expect(pages).toBeGreaterThan(1);
    expect(seen.sort()).toEqual(oldEpoch.map((s) => s.id).sort());
    expect(seen).not.toContain(live.id);
    expect(seen).not.toContain(others.id);
    expect(seen).not.toContain(free.id);
    // Each listed with its claim view (GSI3 projects it): what a strongly consistent read shows.
    const page = await leases.listHeldBy(owner, at(100), { limit: 10 });
    for (const listed of page.sessions) expect(listed).toEqual(await view(listed.sessionId));

    // Taken over: the session names its new relay, so the dead one lists nothing more of it.
    const [takenOver, ...rest] = oldEpoch;
    if (!takenOver) throw new Error("no session");
    const taker = await leases.register(relayName("relay-t"), at(100), TTL);
    expect(await claim(takenOver.id, taker, at(100))).not.toBeNull();
    expect(ids(await leases.listHeldBy(owner, at(100), { limit: 10 })).sort()).toEqual(rest.map((s) => s.id).sort());
  });

  it("rejects a cursor it did not mint (another relay's, or the status listing's)", async () => {
    const foreign = Buffer.from(JSON.stringify({ PK: "SESSION#x", SK: "SESSION", relayOwner: "relay-other" })).toString("base64url");
    const statusCursor = Buffer.from(JSON.stringify({ PK: "SESSION#x", SK: "SESSION", GSI2PK: "STATUS#running", GSI2SK: "x" })).toString("base64url");
    for (const cursor of [foreign, statusCursor, "not-a-cursor"]) {
      await expect(leases.listHeldBy("relay-mine", at(0), { limit: 10, cursor })).rejects.toBeInstanceOf(ValidationError);
    }
  });
});
