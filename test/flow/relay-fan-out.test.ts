/**
 * The relay's fan-out to a session's clients (functions/relay/fan-out.ts, issue 25) over the real
 * connection registry on dynalite: a frame costs no read in steady state; a client that joins is
 * caught up with the turn in progress (and a message finalized since it connected) before its
 * first frame, whether the relay was nudged (at once) or finds it at the backstop read; no frame
 * waits for a read it does not need (the claim reads the list ahead, the backstop runs beside).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionFanOut } from "../../functions/relay/fan-out";
import type { RelayClientMessage } from "../../functions/relay/event-translator";
import { DynamoConnectionRegistry } from "../../functions/store/dynamo-session-items";
import { capturingLogger } from "../support/capturing-logger";
import { startTestTable, type TestTable } from "../support/dynalite";
import { RecordingPush } from "../support/recording-push";
import { waitFor } from "../support/wait-for";
import type { ClientConnection, ConnectionRegistry } from "../../functions/ports/session-items";

let table: TestTable;
let registry: DynamoConnectionRegistry;
let n = 0;

beforeAll(async () => {
  table = await startTestTable();
  registry = new DynamoConnectionRegistry(table.doc, table.tableName);
});
afterAll(async () => {
  await table.close();
});

async function connect(sessionId: string, connectionId: string, at: Date): Promise<void> {
  await registry.add({ connectionId, sessionId, userId: "u", clientType: "web", connectedAt: at.toISOString() });
  expect(await registry.markReady(sessionId, connectionId, new Date(at.getTime() + 900_000))).toBe(true);
}

/** The registry, with each list read held until the test lets it answer (`release`, oldest first unless told). */
function heldReads() {
  const held: { answer: () => void; done: Promise<void> }[] = [];
  const connections = Object.assign(Object.create(registry) as ConnectionRegistry, {
    list: async (sessionId: string): Promise<ClientConnection[]> => {
      const list = await registry.list(sessionId);
      let answer!: () => void;
      const gate = new Promise<void>((resolve) => (answer = resolve));
      held.push({ answer, done: gate });
      await gate;
      return list;
    },
  });
  return {
    connections,
    /** Reads issued and not yet let through. */
    waiting: () => held.length,
    release: async (index = 0) => {
      const [read] = held.splice(index, 1);
      read?.answer();
      await read?.done;
    },
  };
}

function setup(options: { cacheMs?: number; connections?: ConnectionRegistry } = {}) {
  const sessionId = `ses_fan_${++n}`;
  const push = new RecordingPush();
  let clock = Date.parse("2026-01-01T00:00:00Z");
  let open: RelayClientMessage[] = [];
  const fanOut = new SessionFanOut({ connections: options.connections ?? registry, push, logger: capturingLogger().logger, now: () => new Date(clock) }, sessionId, {
    cacheMs: options.cacheMs,
    openFrames: () => open,
  });
  /** The relay's handling of one event: sync, then its frames. */
  const event = (...frames: ({ type: string } & Record<string, unknown>)[]) =>
    fanOut.exclusive(async () => {
      await fanOut.sync();
      for (const f of frames) await fanOut.send(f);
    });
  const to = (connectionId: string) => push.sent.filter((s) => s.connectionId === connectionId).map((s) => s.message);
  return {
    sessionId,
    fanOut,
    event,
    to,
    push,
    now: () => new Date(clock),
    advance: (ms: number) => (clock += ms),
    setOpen: (frames: RelayClientMessage[]) => (open = frames),
  };
}

const delta = (d: string) => ({ type: "message.part.text-delta" as const, messageId: "msg_1", partId: "p1", delta: d });

describe("relay fan-out", () => {
  it("steady state: one read of the connection list, then none per frame", async () => {
    const t = setup();
    await connect(t.sessionId, "a", t.now());
    await connect(t.sessionId, "b", t.now());
    for (let i = 0; i < 50; i++) {
      t.advance(100);
      await t.event(delta(String(i)));
    }
    expect(t.fanOut.reads).toBe(1);
    expect(t.to("a")).toHaveLength(50);
    expect(t.to("b")).toHaveLength(50);
  });

  it("a client joining mid-turn (nudged) gets the message so far before its first frame, then every frame", async () => {
    const t = setup();
    await connect(t.sessionId, "a", t.now());
    await t.event({ type: "message.create", messageId: "msg_1", role: "assistant" }, delta("hel"));
    // Joins right after a broadcast, with the list just read.
    await connect(t.sessionId, "late", t.now());
    t.setOpen([{ type: "message.create", messageId: "msg_1", role: "assistant" as const }, delta("hel")]);
    await t.fanOut.joined();
    await t.event(delta("lo"));
    await t.event({ type: "message.finalize", messageId: "msg_1", text: "hello", reason: "end_turn" });
    expect(t.to("late")).toEqual([{ type: "message.create", messageId: "msg_1", role: "assistant" }, delta("hel"), delta("lo"), { type: "message.finalize", messageId: "msg_1", text: "hello", reason: "end_turn" }]);
    expect(t.to("a").map((m) => m.type)).toEqual(["message.create", "message.part.text-delta", "message.part.text-delta", "message.finalize"]);
    expect(t.fanOut.reads).toBe(2);
  });

  it("without a nudge the backstop read finds the joiner beside the frames: it gets what was finalized since it connected and the turn so far", async () => {
    const t = setup({ cacheMs: 30_000 });
    await connect(t.sessionId, "a", t.now());
    await t.event({ type: "message.create", messageId: "msg_1", role: "assistant" });
    await connect(t.sessionId, "late", t.now());
    t.advance(1_000);
    await t.event({ type: "message.finalize", messageId: "msg_1", text: "first", reason: "end_turn" }, { type: "message.create", messageId: "msg_2", role: "assistant" }, { ...delta("sec"), messageId: "msg_2" });
    expect(t.to("late")).toEqual([]);
    t.advance(30_000);
    // The turn so far, as the translator describes it once this event's delta is applied.
    t.setOpen([{ type: "message.create", messageId: "msg_2", role: "assistant" as const }, { ...delta("second"), messageId: "msg_2" }]);
    // The backstop read is due: this event's frame does not wait for it.
    await t.event({ ...delta("ond"), messageId: "msg_2" });
    expect(t.to("a").at(-1)).toEqual({ ...delta("ond"), messageId: "msg_2" });
    await waitFor(() => t.to("late").length, { message: "the joiner caught up by the backstop read" });
    await t.event({ ...delta("!"), messageId: "msg_2" });
    expect(t.to("late")).toEqual([
      { type: "message.create", messageId: "msg_1", role: "assistant" },
      { type: "message.finalize", messageId: "msg_1", text: "first", reason: "end_turn" },
      { type: "message.create", messageId: "msg_2", role: "assistant" },
      { ...delta("second"), messageId: "msg_2" },
      { ...delta("!"), messageId: "msg_2" },
    ]);
    expect(t.fanOut.reads).toBe(2);
  });

  it("a backstop read that is slow holds up no frame, and is not issued twice", async () => {
    const reads = heldReads();
    const t = setup({ cacheMs: 30_000, connections: reads.connections });
    await connect(t.sessionId, "a", t.now());
    const first = t.event(delta("0"));
    await waitFor(() => reads.waiting(), { message: "the first frame's read" });
    await reads.release();
    await first;
    t.advance(31_000);
    // Three events while the backstop read is out: each frame goes out at once.
    for (const d of ["1", "2", "3"]) await t.event(delta(d));
    expect(t.to("a")).toEqual(["0", "1", "2", "3"].map(delta));
    expect(t.fanOut.reads).toBe(2);
    await waitFor(() => reads.waiting(), { message: "the backstop read" });
    await reads.release();
    await t.event(delta("4"));
    expect(t.to("a")).toHaveLength(5);
    expect(t.fanOut.reads).toBe(2);
  });

  it("a connection the push reports gone is removed from the registry without another read", async () => {
    const t = setup();
    await connect(t.sessionId, "a", t.now());
    await connect(t.sessionId, "gone", t.now());
    await t.event(delta("x"));
    t.push.gone.add("gone");
    await t.event(delta("y"));
    await t.event(delta("z"));
    expect(t.fanOut.reads).toBe(1);
    expect((await registry.list(t.sessionId)).map((c) => c.connectionId)).toEqual(["a"]);
    expect(t.to("a")).toHaveLength(3);
  });

  it("a connection that expired without a $disconnect is removed at the read that found it expired: later frames read nothing", async () => {
    const t = setup();
    await connect(t.sessionId, "a", t.now());
    // Registered, never sent its init (an aborted handshake): its item lives a minute.
    await registry.add({ connectionId: "half", sessionId: t.sessionId, userId: "u", clientType: "web", connectedAt: t.now().toISOString(), expiresAt: new Date(t.now().getTime() + 60_000).toISOString() });
    await t.event(delta("0"));
    expect(t.fanOut.reads).toBe(1);
    t.advance(61_000);
    // Its expiry passed: the fresh item decides (one read), then it is gone from the list and the registry.
    await t.event(delta("1"));
    expect(t.fanOut.reads).toBe(2);
    for (const d of ["2", "3", "4"]) {
      t.advance(100);
      await t.event(delta(d));
    }
    expect(t.fanOut.reads).toBe(2);
    await waitFor(async () => (await registry.list(t.sessionId)).length === 1, { message: "the expired item deleted" });
    expect((await registry.list(t.sessionId)).map((c) => c.connectionId)).toEqual(["a"]);
    expect(t.to("a")).toEqual(["0", "1", "2", "3", "4"].map(delta));
    expect(t.to("half")).toEqual([]);
  });

  it("expiry is judged at the read's time: a read back late removes no connection that was live when it was read", async () => {
    const reads = heldReads();
    const t = setup({ cacheMs: 600_000, connections: reads.connections });
    await connect(t.sessionId, "a", t.now());
    await registry.add({ connectionId: "half", sessionId: t.sessionId, userId: "u", clientType: "web", connectedAt: t.now().toISOString(), expiresAt: new Date(t.now().getTime() + 60_000).toISOString() });
    const prefetched = t.fanOut.prefetch();
    await waitFor(() => reads.waiting(), { message: "the claim's read" });
    // The read was issued with the item live; it is back after the item's expiry.
    t.advance(61_000);
    await reads.release();
    await prefetched;
    expect((await registry.list(t.sessionId)).map((c) => c.connectionId).sort()).toEqual(["a", "half"]);
    // The next event finds a listed expiry passed: its frame waits for a read (issued now), which removes it.
    const sent = t.event(delta("x"));
    await waitFor(() => reads.waiting() > 0 || t.to("a").length > 0, { message: "the expiry's read, or the frame" });
    expect(t.to("a")).toEqual([]);
    await reads.release();
    await sent;
    expect(t.fanOut.reads).toBe(2);
    await waitFor(async () => (await registry.list(t.sessionId)).length === 1, { message: "the expired item deleted" });
    expect(t.to("a")).toEqual([delta("x")]);
  });

  it("nothing sent yet: no read until the first frame, which every ready client gets with all that follow, and no catch-up repeating them", async () => {
    const t = setup();
    await connect(t.sessionId, "a", t.now());
    expect(t.fanOut.listed).toBe(false);
    expect(t.fanOut.reads).toBe(0);
    // The first frames of a stream whose catch-up sent nothing (a session taken over idle): the
    // translator's open state already holds them, and they must not reach the client twice.
    const create = { type: "message.create" as const, messageId: "msg_1", role: "assistant" as const };
    t.setOpen([create, delta("hel")]);
    await t.fanOut.exclusive(async () => {
      await t.fanOut.send(create);
      await t.fanOut.send(delta("hel"));
    });
    await t.event(delta("lo"));
    expect(t.fanOut.reads).toBe(1);
    expect(t.to("a")).toEqual([create, delta("hel"), delta("lo")]);
  });

  it("a claim reads the list ahead: its first frame reads nothing more, and every ready client gets it with all that follow", async () => {
    const t = setup();
    await connect(t.sessionId, "a", t.now());
    await t.fanOut.prefetch();
    expect(t.fanOut.listed).toBe(true);
    expect(t.fanOut.reads).toBe(1);
    // Nothing was sent before the read: no catch-up repeats the first frames to the clients it listed.
    const create = { type: "message.create" as const, messageId: "msg_1", role: "assistant" as const };
    t.setOpen([create, delta("hel")]);
    await t.event(create, delta("hel"));
    await t.event(delta("lo"));
    expect(t.fanOut.reads).toBe(1);
    expect(t.to("a")).toEqual([create, delta("hel"), delta("lo")]);
  });

  it("a first frame while the claim's read is out waits for that read, not a second one", async () => {
    const reads = heldReads();
    const t = setup({ connections: reads.connections });
    await connect(t.sessionId, "a", t.now());
    const prefetched = t.fanOut.prefetch();
    await waitFor(() => reads.waiting(), { message: "the claim's read" });
    const sent = t.event(delta("x"));
    await reads.release();
    await Promise.all([sent, prefetched]);
    expect(t.fanOut.reads).toBe(1);
    expect(t.to("a")).toEqual([delta("x")]);
  });

  it("a read back after a later one was applied changes nothing: a joiner is caught up once", async () => {
    const reads = heldReads();
    const t = setup({ cacheMs: 30_000, connections: reads.connections });
    await connect(t.sessionId, "a", t.now());
    const first = t.event({ type: "message.create", messageId: "msg_1", role: "assistant" });
    await waitFor(() => reads.waiting());
    await reads.release();
    await first;
    // A backstop read goes out, then a client joins and is nudged: the join's read lists it.
    t.advance(31_000);
    await t.event(delta("a"));
    await waitFor(() => reads.waiting() === 1, { message: "the backstop read" });
    await connect(t.sessionId, "late", t.now());
    t.setOpen([{ type: "message.create", messageId: "msg_1", role: "assistant" as const }, delta("a")]);
    const join = t.fanOut.joined();
    await waitFor(() => reads.waiting() === 2, { message: "the join's read" });
    await reads.release(1);
    await join;
    expect(t.to("late")).toEqual([{ type: "message.create", messageId: "msg_1", role: "assistant" }, delta("a")]);
    // The backstop read (issued first, which did not list the joiner) comes back last: ignored.
    await reads.release(0);
    await t.event(delta("b"));
    expect(t.to("late")).toEqual([{ type: "message.create", messageId: "msg_1", role: "assistant" }, delta("a"), delta("b")]);
    expect(t.fanOut.reads).toBe(3);
  });
});
