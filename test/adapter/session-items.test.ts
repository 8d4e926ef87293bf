/**
 * The items in a session's partition (store/dynamo-session-items.ts) against dynalite: the
 * prompt queue's order and its one-winner moves, the idempotent audit log with its cursor, and
 * the connection registry. Every test uses fresh session ids, so tests share one table.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { ValidationError } from "../../functions/domain/errors";
import { newSessionId, newSortableId } from "../../functions/domain/ids";
import type { ClientConnection, LifecycleEvent, QueuedPrompt } from "../../functions/ports/session-items";
import { DynamoConnectionRegistry, DynamoLifecycleEventLog, DynamoPromptQueue, DynamoProxyConnectionRegistry } from "../../functions/store/dynamo-session-items";
import { keys } from "../../functions/store/table-layout";
import { T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let prompts: DynamoPromptQueue;
let events: DynamoLifecycleEventLog;
let connections: DynamoConnectionRegistry;
let proxies: DynamoProxyConnectionRegistry;
const at = (ms: number) => new Date(T0.getTime() + ms);

beforeAll(async () => {
  table = await startTestTable();
  prompts = new DynamoPromptQueue(table.doc, table.tableName);
  events = new DynamoLifecycleEventLog(table.doc, table.tableName);
  connections = new DynamoConnectionRegistry(table.doc, table.tableName);
  proxies = new DynamoProxyConnectionRegistry(table.doc, table.tableName);
});
afterAll(async () => table.close());

/** Raw items of a session partition whose SK starts with `prefix` (independent of the adapter). */
async function rawItems(sessionId: string, prefix: string): Promise<Record<string, unknown>[]> {
  const out = await table.doc.send(
    new QueryCommand({
      TableName: table.tableName,
      KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
      ExpressionAttributeValues: { ":pk": keys.sessionPartition(sessionId), ":prefix": prefix },
    }),
  );
  return out.Items ?? [];
}

function buildEvent(overrides: Partial<LifecycleEvent> & Pick<LifecycleEvent, "sessionId">): LifecycleEvent {
  return {
    eventId: newSortableId("evt", T0),
    at: T0.toISOString(),
    flow: "pause",
    outcome: "committed",
    from: "running",
    to: "paused",
    reason: "user",
    actor: "user",
    execution: "pause-exec-1",
    sandboxId: null,
    previousSandboxId: "sb-1",
    message: null,
    timings: { Begin: 12, Snapshot: 340 },
    ...overrides,
  };
}

function buildConnection(overrides: Partial<ClientConnection> & Pick<ClientConnection, "sessionId" | "connectionId">): ClientConnection {
  return { userId: "user-a", clientType: "web", connectedAt: T0.toISOString(), ready: false, ...overrides };
}

describe("DynamoPromptQueue: order", () => {
  it("lists prompts enqueued in successive milliseconds in insertion order, all queued", async () => {
    const sessionId = newSessionId();
    const sent: QueuedPrompt[] = [];
    for (let i = 0; i < 6; i++) sent.push(await prompts.enqueue({ sessionId, content: `p${i}`, source: "user:u1", now: at(i) }));
    const listed = await prompts.list(sessionId);
    expect(listed.map((p) => p.content)).toEqual(["p0", "p1", "p2", "p3", "p4", "p5"]);
    expect(listed).toEqual(sent);
    for (const p of listed) expect(p).toMatchObject({ sessionId, status: "queued", source: "user:u1" });
  });

  it("orders by enqueue time, not by write order (a later `now` written first still lists last)", async () => {
    const sessionId = newSessionId();
    await prompts.enqueue({ sessionId, content: "late", source: "automation", now: at(5) });
    await prompts.enqueue({ sessionId, content: "early", source: "automation", now: at(1) });
    expect((await prompts.list(sessionId)).map((p) => p.content)).toEqual(["early", "late"]);
  });

  it("keeps every prompt enqueued in the same millisecond, each with its own id", async () => {
    const sessionId = newSessionId();
    const sent = await Promise.all(Array.from({ length: 10 }, (_, i) => prompts.enqueue({ sessionId, content: `same-${i}`, source: "automation", now: at(0) })));
    const listed = await prompts.list(sessionId);
    expect(new Set(listed.map((p) => p.promptId)).size).toBe(10);
    expect(listed.map((p) => p.content).sort()).toEqual(sent.map((p) => p.content).sort());
  });

  // newSortableId carries a per-process sequence within the millisecond; without it 20 prompts
  // would come back in insertion order by luck once in 20! runs.
  it("lists prompts enqueued in the same millisecond in insertion order", async () => {
    const sessionId = newSessionId();
    const contents = Array.from({ length: 20 }, (_, i) => `same-ms-${String(i).padStart(2, "0")}`);
    for (const content of contents) await prompts.enqueue({ sessionId, content, source: "automation", now: at(0) });
    expect((await prompts.list(sessionId)).map((p) => p.content)).toEqual(contents);
  });
});

describe("DynamoPromptQueue: status and moves", () => {
  it("lists by status after moves, in queue order", async () => {
    const sessionId = newSessionId();
    const [a, b, c] = [
      await prompts.enqueue({ sessionId, content: "a", source: "automation", now: at(1) }),
      await prompts.enqueue({ sessionId, content: "b", source: "automation", now: at(2) }),
      await prompts.enqueue({ sessionId, content: "c", source: "automation", now: at(3) }),
    ];
    if (!a || !b || !c) throw new Error("enqueue returned nothing");
    expect(await prompts.move(a, "queued", "processing", at(10))).toBe(true);
    expect(await prompts.move(a, "processing", "completed", at(11))).toBe(true);
    expect(await prompts.move(c, "queued", "processing", at(12))).toBe(true);

    expect((await prompts.list(sessionId, "queued")).map((p) => p.content)).toEqual(["b"]);
    expect((await prompts.list(sessionId, "processing")).map((p) => p.content)).toEqual(["c"]);
    const completed = await prompts.list(sessionId, "completed");
    expect(completed).toEqual([{ ...a, status: "completed", updatedAt: at(11).toISOString() }]);
    expect((await prompts.list(sessionId)).map((p) => `${p.content}:${p.status}`)).toEqual(["a:completed", "b:queued", "c:processing"]);
  });

  it("race: 8 concurrent queued -> processing moves of one prompt, exactly one wins", async () => {
    const sessionId = newSessionId();
    const prompt = await prompts.enqueue({ sessionId, content: "only once", source: "user:u1", now: at(0) });
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => prompts.move(prompt, "queued", "processing", at(100 + i))));
    expect(results.filter((r) => r)).toHaveLength(1);
    expect(results.filter((r) => !r)).toHaveLength(7);
    const winner = results.indexOf(true);
    expect(await prompts.list(sessionId)).toEqual([{ ...prompt, status: "processing", updatedAt: at(100 + winner).toISOString() }]);
  });

  it("a move from the wrong status returns false and changes nothing", async () => {
    const sessionId = newSessionId();
    const prompt = await prompts.enqueue({ sessionId, content: "x", source: "automation", now: at(0) });
    expect(await prompts.move(prompt, "processing", "completed", at(5))).toBe(false);
    expect(await prompts.move(prompt, "completed", "queued", at(6))).toBe(false);
    expect(await prompts.list(sessionId)).toEqual([prompt]);
  });

  it("a move of an unknown prompt returns false and creates no item", async () => {
    const sessionId = newSessionId();
    const ghost = { sessionId, promptId: newSortableId("prm", T0), createdAt: T0.toISOString() };
    expect(await prompts.move(ghost, "queued", "processing", at(1))).toBe(false);
    expect(await rawItems(sessionId, "PROMPT#")).toEqual([]);
  });

  it("prompts of two sessions never mix, and a move names its own session", async () => {
    const s1 = newSessionId();
    const s2 = newSessionId();
    const p1 = await prompts.enqueue({ sessionId: s1, content: "one", source: "automation", now: at(0) });
    const p2 = await prompts.enqueue({ sessionId: s2, content: "two", source: "automation", now: at(0) });
    expect(await prompts.list(s1)).toEqual([p1]);
    expect(await prompts.list(s2)).toEqual([p2]);
    // The right prompt id under the wrong session is not that prompt.
    expect(await prompts.move({ ...p1, sessionId: s2 }, "queued", "processing", at(1))).toBe(false);
    expect(await prompts.list(s1, "queued")).toEqual([p1]);
    expect(await prompts.list(s2)).toEqual([p2]);
  });
});

describe("DynamoPromptQueue: finished prompts leave the queue's range", () => {
  /** `count` prompts through queued -> processing -> completed (the last one failed instead). */
  async function history(sessionId: string, count: number): Promise<QueuedPrompt[]> {
    const done: QueuedPrompt[] = [];
    for (let i = 0; i < count; i++) {
      const p = await prompts.enqueue({ sessionId, content: `turn ${i}`, source: "user:u1", now: at(i * 10) });
      expect(await prompts.move(p, "queued", "processing", at(i * 10 + 1))).toBe(true);
      const failed = i === count - 1;
      expect(await prompts.move(p, "processing", failed ? "failed" : "completed", at(i * 10 + 2), failed ? { failure: { reason: "error", code: "agent_error", message: "boom" } } : {})).toBe(true);
      done.push(p);
    }
    return done;
  }

  it("the open range holds only queued and processing prompts, so the queue's reads do not grow with the history", async () => {
    const sessionId = newSessionId();
    const done = await history(sessionId, 30);
    const waiting = await prompts.enqueue({ sessionId, content: "next", source: "user:u2", now: at(1_000) });
    const busy = await prompts.enqueue({ sessionId, content: "now", source: "user:u2", now: at(999) });
    expect(await prompts.move(busy, "queued", "processing", at(1_001))).toBe(true);

    expect((await rawItems(sessionId, "PROMPT#")).map((i) => i.content)).toEqual(["now", "next"]);
    expect(await rawItems(sessionId, "PROMPTDONE#")).toHaveLength(30);
    expect((await prompts.listOpen(sessionId)).map((p) => `${p.content}:${p.status}`)).toEqual(["now:processing", "next:queued"]);
    expect(await prompts.list(sessionId, "queued")).toEqual([waiting]);
    // The history is still there, in queue order, with what each move wrote.
    const all = await prompts.list(sessionId);
    expect(all.map((p) => p.content)).toEqual([...done.map((p) => p.content), "now", "next"]);
    expect(await prompts.list(sessionId, "completed")).toHaveLength(29);
    expect(await prompts.list(sessionId, "failed")).toEqual([{ ...done[29], status: "failed", updatedAt: at(292).toISOString(), failure: { reason: "error", code: "agent_error", message: "boom" } }]);
    // A finished prompt never moves again.
    expect(await prompts.move(done[0] as QueuedPrompt, "completed", "queued", at(2_000))).toBe(false);
    expect(await prompts.move(done[0] as QueuedPrompt, "processing", "completed", at(2_000))).toBe(false);
    expect(await rawItems(sessionId, "PROMPT#")).toHaveLength(2);
  });

  it("a finished prompt still in the open range (a move stopped before relocating it; a table from before) is relocated by the next read, once", async () => {
    const sessionId = newSessionId();
    const finished = { promptId: newSortableId("prm", T0), sessionId, content: "old", status: "completed", source: "user:u1", createdAt: at(1).toISOString(), updatedAt: at(2).toISOString() };
    const both = { ...finished, promptId: newSortableId("prm", T0), content: "half-moved", createdAt: at(3).toISOString() };
    const put = (key: Record<string, string>, item: object) => table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...key, ...item } }));
    await put(keys.prompt(sessionId, finished.createdAt, finished.promptId), finished);
    // Put in the finished range, not yet deleted from the open one.
    await put(keys.prompt(sessionId, both.createdAt, both.promptId), both);
    await put(keys.finishedPrompt(sessionId, both.createdAt, both.promptId), both);
    const queued = await prompts.enqueue({ sessionId, content: "new", source: "user:u1", now: at(5) });

    // Listed once each, in queue order, before and after the relocation.
    expect(await prompts.list(sessionId)).toEqual([finished, both, queued]);
    expect(await prompts.listOpen(sessionId)).toEqual([queued]);
    expect((await rawItems(sessionId, "PROMPT#")).map((i) => i.content)).toEqual(["new"]);
    expect((await rawItems(sessionId, "PROMPTDONE#")).map((i) => i.content)).toEqual(["old", "half-moved"]);
    expect(await prompts.list(sessionId)).toEqual([finished, both, queued]);
  });

  it("a long history from before moves over a few reads, 25 prompts a read, and is listed whole meanwhile", async () => {
    const sessionId = newSessionId();
    const old = Array.from({ length: 60 }, (_, i) => ({ promptId: newSortableId("prm", T0), sessionId, content: `old ${i}`, status: "completed", source: "user:u1", createdAt: at(i).toISOString(), updatedAt: at(i).toISOString() }));
    for (const p of old) await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...keys.prompt(sessionId, p.createdAt, p.promptId), ...p } }));
    const left = [];
    for (let read = 0; read < 3; read++) {
      expect(await prompts.listOpen(sessionId)).toEqual([]);
      left.push((await rawItems(sessionId, "PROMPT#")).length);
    }
    expect(left).toEqual([35, 10, 0]);
    expect(await prompts.list(sessionId)).toEqual(old);
  });

  it("a keyed prompt is found after it finished", async () => {
    const sessionId = newSessionId();
    const { prompt } = await prompts.enqueueOnce({ sessionId, promptId: newSortableId("prm", T0), content: "keyed", source: "user:u1", now: at(0) });
    expect(await prompts.move(prompt, "queued", "processing", at(1))).toBe(true);
    expect(await prompts.move(prompt, "processing", "completed", at(2))).toBe(true);
    expect(await prompts.getKeyed(sessionId, prompt.promptId)).toEqual({ ...prompt, status: "completed", updatedAt: at(2).toISOString() });
  });
});

describe("DynamoLifecycleEventLog", () => {
  it("append is idempotent per event: the same event twice is stored once", async () => {
    const sessionId = newSessionId();
    const event = buildEvent({ sessionId });
    expect(await events.append(event)).toEqual(event);
    await events.append(event);
    expect(await rawItems(sessionId, "EVENT#")).toHaveLength(1);
    expect(await events.list(sessionId, { limit: 10 })).toEqual({ items: [event], nextCursor: null });
  });

  it("rejects an event that does not match the schema and stores nothing", async () => {
    const sessionId = newSessionId();
    const bad = { ...buildEvent({ sessionId }), outcome: "exploded" } as unknown as LifecycleEvent;
    await expect(events.append(bad)).rejects.toThrow();
    expect(await rawItems(sessionId, "EVENT#")).toEqual([]);
  });

  it("lists oldest first and pages through every event with limit and cursor", async () => {
    const sessionId = newSessionId();
    const all = Array.from({ length: 7 }, (_, i) => buildEvent({ sessionId, at: at(i * 1000).toISOString(), execution: `exec-${i}` }));
    // Written out of order: the log orders by `at`, not by write order.
    for (const e of [all[3], all[0], all[6], all[1], all[5], all[2], all[4]]) if (e) await events.append(e);

    const seen: LifecycleEvent[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { items: LifecycleEvent[]; nextCursor: string | null } = await events.list(sessionId, { limit: 3, cursor });
      expect(page.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.items);
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(cursor).toBeNull();
    expect(seen).toEqual(all);
    expect((await events.list(sessionId, { limit: 2 })).items.map((e) => e.execution)).toEqual(["exec-0", "exec-1"]);
  });

  it("never lists another session's events, even with a cursor minted for that session", async () => {
    const a = newSessionId();
    const b = newSessionId();
    for (let i = 0; i < 4; i++) {
      await events.append(buildEvent({ sessionId: a, at: at(i * 2).toISOString(), execution: `a-${i}` }));
      await events.append(buildEvent({ sessionId: b, at: at(i * 2 + 1).toISOString(), execution: `b-${i}` }));
    }
    expect((await events.list(a, { limit: 100 })).items.map((e) => e.execution)).toEqual(["a-0", "a-1", "a-2", "a-3"]);
    const bPage = await events.list(b, { limit: 1 });
    expect(bPage.nextCursor).toBeTruthy();
    // A cursor minted for b's trail is rejected on a's, like the org listing's foreign cursors.
    await expect(events.list(a, { limit: 100, cursor: bPage.nextCursor })).rejects.toThrow(ValidationError);
  });

  it("rejects garbage cursors and cursors that point at other item types with ValidationError", async () => {
    const sessionId = newSessionId();
    await events.append(buildEvent({ sessionId }));
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const bad = [
      "not-a-cursor",
      Buffer.from("{not json").toString("base64url"),
      encode({ sk: "SESSION" }),
      encode({ sk: `PROMPT#${T0.toISOString()}#prm_x` }),
      encode({ sk: "CONN#abc" }),
      encode({ sk: 42 }),
      encode(["EVENT#x"]),
      encode({ PK: keys.sessionPartition(newSessionId()), SK: "EVENT#x" }),
    ];
    for (const cursor of bad) {
      await expect(events.list(sessionId, { limit: 5, cursor }), cursor).rejects.toBeInstanceOf(ValidationError);
    }
  });
});

describe("DynamoConnectionRegistry", () => {
  it("add is idempotent and list is per session", async () => {
    const s1 = newSessionId();
    const s2 = newSessionId();
    const c1 = buildConnection({ sessionId: s1, connectionId: "conn-1" });
    const c2 = buildConnection({ sessionId: s1, connectionId: "conn-2", clientType: "cli", userId: "user-b" });
    const other = buildConnection({ sessionId: s2, connectionId: "conn-3" });
    await connections.add(c1);
    await connections.add(c1);
    await connections.add(c2);
    await connections.add(other);
    expect(await connections.list(s1)).toEqual([c1, c2]);
    expect(await connections.list(s2)).toEqual([other]);
    expect(await connections.list(newSessionId())).toEqual([]);
  });

  it("remove is idempotent, removing an unknown connection is a no-op, and it touches only its session", async () => {
    const s1 = newSessionId();
    const s2 = newSessionId();
    const c1 = buildConnection({ sessionId: s1, connectionId: "conn-a" });
    const c2 = buildConnection({ sessionId: s1, connectionId: "conn-b" });
    // Same connection id in another session: removing it from s1 must leave s2's alone.
    const sameIdElsewhere = buildConnection({ sessionId: s2, connectionId: "conn-a" });
    for (const c of [c1, c2, sameIdElsewhere]) await connections.add(c);

    await connections.remove(s1, "conn-a");
    await connections.remove(s1, "conn-a");
    await expect(connections.remove(s1, "never-connected")).resolves.toBeUndefined();
    await expect(connections.remove(newSessionId(), "conn-x")).resolves.toBeUndefined();

    expect(await connections.list(s1)).toEqual([c2]);
    expect(await connections.list(s2)).toEqual([sameIdElsewhere]);
  });
});

describe("DynamoConnectionRegistry: lookup and readiness", () => {
  it("looks a connection up by id alone, marks it ready, and forgets it on remove", async () => {
    const sessionId = newSessionId();
    const c = buildConnection({ sessionId, connectionId: "conn-lookup" });
    await connections.add(c);
    expect(await connections.lookup("conn-lookup")).toEqual(c);
    expect(await connections.markReady(sessionId, "conn-lookup")).toBe(true);
    expect((await connections.list(sessionId))[0]?.ready).toBe(true);
    await connections.remove(sessionId, "conn-lookup");
    expect(await connections.lookup("conn-lookup")).toBeNull();
    // A connection that left is never resurrected by a late markReady.
    expect(await connections.markReady(sessionId, "conn-lookup")).toBe(false);
    expect(await connections.list(sessionId)).toEqual([]);
  });

  it("removing a connection id from another session leaves the owner's lookup alone", async () => {
    const s1 = newSessionId();
    const c = buildConnection({ sessionId: s1, connectionId: "conn-owned" });
    await connections.add(c);
    await connections.remove(newSessionId(), "conn-owned");
    expect(await connections.lookup("conn-owned")).toEqual(c);
  });
});

describe("DynamoProxyConnectionRegistry (seed 002 constraint 8, verification 8)", () => {
  const proxy = (sessionId: string, proxyId: string, expiresInMs: number, openedMs = 0) => ({
    proxyId,
    sessionId,
    kind: "terminal",
    openedAt: at(openedMs).toISOString(),
    expiresAt: at(openedMs + expiresInMs).toISOString(),
  });

  it("a set by id: registering twice keeps one entry (first openedAt, latest expiry); removing twice stays at zero", async () => {
    const s = newSessionId();
    await proxies.put(proxy(s, "term-1", 60_000));
    await proxies.put(proxy(s, "term-1", 60_000, 30_000));
    await proxies.put(proxy(s, "vscode-1", 60_000));
    expect(await proxies.listLive(s, at(1_000))).toEqual([
      { ...proxy(s, "term-1", 90_000), kind: "terminal" },
      proxy(s, "vscode-1", 60_000),
    ]);
    expect(await proxies.remove(s, "term-1")).toBe(true);
    expect(await proxies.remove(s, "term-1")).toBe(false);
    expect(await proxies.remove(s, "never-opened")).toBe(false);
    expect((await proxies.listLive(s, at(1_000))).map((p) => p.proxyId)).toEqual(["vscode-1"]);
    expect(await rawItems(s, "PROXY#")).toHaveLength(1);
  });

  it("an expired registration is not live, and other sessions' proxies never show", async () => {
    const s = newSessionId();
    const other = newSessionId();
    await proxies.put(proxy(s, "term-old", 10_000));
    await proxies.put(proxy(other, "term-x", 600_000));
    expect(await proxies.listLive(s, at(5_000))).toHaveLength(1);
    expect(await proxies.listLive(s, at(10_000))).toEqual([]);
    expect((await proxies.listLive(other, at(10_000))).map((p) => p.proxyId)).toEqual(["term-x"]);
  });
});
