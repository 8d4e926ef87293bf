import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConflictError, InvalidTransitionError, NotFoundError, StaleWriteError, ValidationError } from "../../functions/domain/errors";
import { DynamoApiTokenStore, DynamoSessionStore, hashToken } from "../../functions/store/dynamo-session-store";
import { GetCommand, ScanCommand } from "@aws-sdk/lib-dynamodb";
import { keys } from "../../functions/store/table-layout";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let store: DynamoSessionStore;
const later = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

beforeAll(async () => {
  table = await startTestTable();
  store = new DynamoSessionStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

describe("create and get", () => {
  it("round-trips a session and rejects a second create with the same id", async () => {
    const s = buildSession({ title: "first" });
    await store.createSession(s);
    expect(await store.getSession(s.id)).toEqual(s);
    await expect(store.createSession({ ...s, title: "second" })).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getSession(s.id))?.title).toBe("first");
  });

  it("returns null for an unknown id", async () => {
    expect(await store.getSession("ses_00000000000000000000000000")).toBeNull();
  });
});

describe("transition", () => {
  it("applies an allowed transition, bumps the version and moves the status index", async () => {
    const s = buildSession();
    await store.createSession(s);
    const running = await store.transition(s, "running", later(10), { sandboxId: "sb-1" });
    expect(running).toMatchObject({ status: "running", version: 2, sandboxId: "sb-1", runningSince: later(10).toISOString() });
    expect(await store.getSession(s.id)).toEqual(running);
    const byStatus = await store.listSessionsByStatus("running", { limit: 100 });
    expect(byStatus.items.map((i) => i.id)).toContain(s.id);
    const paused = await store.transition(running, "paused", later(70), { sandboxId: null, snapshotId: "snap-1", pauseReason: "user" });
    expect(paused).toMatchObject({ status: "paused", activeSeconds: 60, runningSince: null, pausedAt: later(70).toISOString() });
    expect((await store.listSessionsByStatus("running", { limit: 100 })).items.map((i) => i.id)).not.toContain(s.id);
  });

  it("rejects a stale writer: 0 items affected, StaleWriteError", async () => {
    const s = buildSession();
    await store.createSession(s);
    const running = await store.transition(s, "running", later(1), { sandboxId: "sb-new" });
    // `s` is the version-1 snapshot a stale actor still holds.
    await expect(store.transition(s, "error", later(2), { sandboxId: "sb-stale" })).rejects.toBeInstanceOf(StaleWriteError);
    expect(await store.getSession(s.id)).toEqual(running);
  });

  it("rejects an illegal transition in code and in the condition expression", async () => {
    const s = buildSession();
    await store.createSession(s);
    const stopped = await store.transition(s, "stopped", later(1));
    // In code: applyTransition refuses stopped -> running.
    await expect(store.transition(stopped, "running", later(2))).rejects.toBeInstanceOf(InvalidTransitionError);
    // In DynamoDB: a caller holding a stale `starting` copy with the current version still cannot
    // move a stopped session, because the condition lists the allowed source statuses.
    await expect(store.transition({ ...stopped, status: "starting" }, "running", later(3))).rejects.toSatisfy(
      (e: unknown) => e instanceof InvalidTransitionError && e.from === "stopped" && e.to === "running",
    );
    expect(await store.getSession(s.id)).toEqual(stopped);
  });

  it("reports a missing session as NotFoundError and creates nothing", async () => {
    const ghost = buildSession();
    await expect(store.transition(ghost, "running", later(1))).rejects.toBeInstanceOf(NotFoundError);
    expect(await store.getSession(ghost.id)).toBeNull();
  });

  it("race: many concurrent transitions of one session, exactly one wins", async () => {
    const s = buildSession();
    await store.createSession(s);
    const targets = ["running", "error", "stopped", "running", "error", "stopped", "running", "running"] as const;
    const results = await Promise.allSettled(
      targets.map((to, i) => store.transition(s, to, later(i + 1), { sandboxId: `sb-${i}` })),
    );
    const winners = results.filter((r) => r.status === "fulfilled");
    const losers = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(targets.length - 1);
    for (const l of losers) expect(l.reason).toBeInstanceOf(StaleWriteError);
    const stored = await store.getSession(s.id);
    const winner = (winners[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof store.transition>>>).value;
    expect(stored).toEqual(winner);
    expect(stored?.version).toBe(2);
  });

  it("race: two actors each read then write in a loop; versions never fork", async () => {
    const s = buildSession();
    await store.createSession(s);
    let wins = 0;
    let stale = 0;
    const actor = async (name: string) => {
      for (let i = 0; i < 10; i++) {
        const current = await store.getSession(s.id);
        if (!current) throw new Error("session vanished");
        const to = current.status === "running" ? "paused" : "running";
        try {
          await store.transition(current, to, later(i), { sandboxId: to === "running" ? `${name}-${i}` : null });
          wins++;
        } catch (err) {
          if (!(err instanceof StaleWriteError)) throw err;
          stale++;
        }
      }
    };
    await Promise.all([actor("a"), actor("b")]);
    const final = await store.getSession(s.id);
    // Every successful write bumped the version by exactly one: no lost update.
    expect(final?.version).toBe(1 + wins);
    expect(wins + stale).toBe(20);
  });
});

describe("touchActivity", () => {
  it("moves lastActivityAt forward only and leaves the version alone", async () => {
    const s = buildSession();
    await store.createSession(s);
    await store.touchActivity(s.id, later(30));
    await store.touchActivity(s.id, later(10)); // delayed, older: must not move it back
    const stored = await store.getSession(s.id);
    expect(stored?.lastActivityAt).toBe(later(30).toISOString());
    expect(stored?.version).toBe(1);
    // A lifecycle writer holding the pre-touch copy still wins: activity never makes it stale,
    // and its write does not roll lastActivityAt back.
    await store.transition(s, "running", later(40));
    expect((await store.getSession(s.id))?.lastActivityAt).toBe(later(30).toISOString());
  });

  it("a client's connect is counted in the same write, and still counted when the activity time does not move (issue 15)", async () => {
    const s = buildSession();
    await store.createSession(s);
    await store.touchActivity(s.id, later(30), { clientConnected: true });
    await store.touchActivity(s.id, later(10), { clientConnected: true }); // older: the time stays, the count moves
    await store.touchActivity(s.id, later(40)); // activity alone: no count
    const stored = await store.getSession(s.id);
    expect(stored?.lastActivityAt).toBe(later(40).toISOString());
    expect(stored?.clientConnects).toBe(2);
    expect(stored?.version).toBe(1);
    // A lifecycle write returns the count as stored (the flows compare it: flows/steps/finish.ts).
    expect((await store.transition(stored ?? s, "running", later(50))).clientConnects).toBe(2);
  });

  it("a stored prompt is counted in the returning touch, also when the activity time does not move (issue 15)", async () => {
    const s = buildSession();
    await store.createSession(s);
    expect((await store.getSession(s.id))?.promptsEnqueued).toBe(0);
    expect((await store.touchActivityReturning(s.id, later(30), { promptQueued: true })).session.promptsEnqueued).toBe(1);
    const older = await store.touchActivityReturning(s.id, later(10), { promptQueued: true });
    expect(older.session).toMatchObject({ promptsEnqueued: 2, lastActivityAt: later(30).toISOString() });
    expect((await store.touchActivityReturning(s.id, later(40))).session.promptsEnqueued).toBe(2);
    await expect(store.touchActivityReturning(buildSession().id, later(1), { promptQueued: true })).rejects.toBeInstanceOf(NotFoundError);
  });

  it("NotFoundError for an unknown session, and no item is created", async () => {
    const ghost = buildSession();
    await expect(store.touchActivity(ghost.id, later(1))).rejects.toBeInstanceOf(NotFoundError);
    expect(await store.getSession(ghost.id)).toBeNull();
  });
});

describe("recordAgentIdle (the relay's idle boundary in one write, issue 15)", () => {
  it("records the agent idle and the activity in one write and returns the session as written, without bumping the version", async () => {
    const s = buildSession({ sandboxId: "sb-idle", agentBusy: true });
    await store.createSession(s);
    const sent: string[] = [];
    const counting = countingStore(sent);
    const written = await counting.recordAgentIdle(s.id, "sb-idle", later(30));
    expect(sent).toEqual(["UpdateCommand"]);
    expect(written).toMatchObject({ agentBusy: false, lastKnownAgentIdleAt: later(30).toISOString(), lastActivityAt: later(30).toISOString(), version: 1 });
    expect(await store.getSession(s.id)).toEqual(written);
  });

  it("a newer activity time already stored stays; the agent state is still recorded", async () => {
    const s = buildSession({ sandboxId: "sb-idle", agentBusy: true });
    await store.createSession(s);
    await store.touchActivity(s.id, later(50));
    const written = await store.recordAgentIdle(s.id, "sb-idle", later(30));
    expect(written).toMatchObject({ agentBusy: false, lastKnownAgentIdleAt: later(30).toISOString(), lastActivityAt: later(50).toISOString() });
    expect(await store.getSession(s.id)).toEqual(written);
  });

  it("null and nothing written when the session references another sandbox, or does not exist", async () => {
    const s = buildSession({ sandboxId: "sb-new", agentBusy: true });
    await store.createSession(s);
    expect(await store.recordAgentIdle(s.id, "sb-old", later(30))).toBeNull();
    expect(await store.getSession(s.id)).toEqual(s);
    const ghost = buildSession();
    expect(await store.recordAgentIdle(ghost.id, "sb-idle", later(1))).toBeNull();
    expect(await store.getSession(ghost.id)).toBeNull();
  });

  it("decides from the item a refused write returns (ALL_OLD) where the backend sends it: no read", async () => {
    const s = buildSession({ sandboxId: "sb-new" });
    await store.createSession(s);
    const sent: string[] = [];
    // DynamoDB returns the item with the condition failure; dynalite does not, so it is attached here.
    const refusing = countingStore(sent, (command) => {
      if (command.constructor.name !== "UpdateCommand") return null;
      return Object.assign(new Error("The conditional request failed"), { name: "ConditionalCheckFailedException", Item: { sandboxId: { S: "sb-new" } } });
    });
    expect(await refusing.recordAgentIdle(s.id, "sb-old", later(30))).toBeNull();
    expect(sent).toEqual(["UpdateCommand"]);
  });
});

/** The store over the test table, recording each command sent; `refuse` may fail one instead of sending it. */
function countingStore(sent: string[], refuse: (command: object) => Error | null = () => null): DynamoSessionStore {
  const doc = new Proxy(table.doc, {
    get(target, prop, receiver) {
      if (prop !== "send") return Reflect.get(target, prop, receiver);
      return (command: object) => {
        sent.push(command.constructor.name);
        const refusal = refuse(command);
        return refusal ? Promise.reject(refusal) : target.send(command as never);
      };
    },
  });
  return new DynamoSessionStore(doc, table.tableName);
}

describe("listing", () => {
  it("pages an org's sessions newest first with a cursor, filtered by status, never leaking other orgs", async () => {
    const org = `org-list-${Date.now()}`;
    const created = [];
    for (let i = 0; i < 7; i++) {
      const s = buildSession({ orgId: org, createdAt: later(i).toISOString(), updatedAt: later(i).toISOString() });
      await store.createSession(s);
      created.push(s);
    }
    await store.createSession(buildSession({ orgId: `${org}-other` }));
    // Make every other session running.
    for (const s of created.filter((_, i) => i % 2 === 0)) await store.transition(s, "running", later(100));

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await store.listSessionsByOrg(org, { limit: 3, cursor });
      expect(page.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.items.map((i) => i.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual([...created].reverse().map((s) => s.id));

    const running: string[] = [];
    cursor = null;
    pages = 0;
    do {
      const page = await store.listSessionsByOrg(org, { limit: 2, cursor, status: "running" });
      for (const i of page.items) expect(i.status).toBe("running");
      running.push(...page.items.map((i) => i.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(running).toEqual(created.filter((_, i) => i % 2 === 0).reverse().map((s) => s.id));
  });

  it("rejects a cursor minted for another org", async () => {
    const a = `org-cur-a-${Date.now()}`;
    for (let i = 0; i < 3; i++) await store.createSession(buildSession({ orgId: a, createdAt: later(i).toISOString() }));
    const page = await store.listSessionsByOrg(a, { limit: 1 });
    expect(page.nextCursor).toBeTruthy();
    await expect(store.listSessionsByOrg("org-b", { limit: 1, cursor: page.nextCursor })).rejects.toBeInstanceOf(ValidationError);
    await expect(store.listSessionsByOrg(a, { limit: 1, cursor: "not-base64-json" })).rejects.toBeInstanceOf(ValidationError);
  });
});

describe("api tokens", () => {
  it("stores only the SHA-256 of a token and resolves it to its principal", async () => {
    const tokens = new DynamoApiTokenStore(table.doc, table.tableName);
    const token = "sbx_test-token-value-0123456789abcdef";
    await tokens.putToken(token, { userId: "u1", orgId: "o1" }, T0);
    expect(await tokens.resolveToken(token)).toMatchObject({ userId: "u1", orgId: "o1", role: "member" });
    expect(await tokens.resolveToken(`${token}x`)).toBeNull();
    const stored = await table.doc.send(new GetCommand({ TableName: table.tableName, Key: keys.apiToken(hashToken(token)) }));
    expect(stored.Item?.PK).toBe(`APITOKEN#${hashToken(token)}`);
    const all = await table.doc.send(new ScanCommand({ TableName: table.tableName }));
    expect(JSON.stringify(all.Items)).not.toContain(token);
  });
});
