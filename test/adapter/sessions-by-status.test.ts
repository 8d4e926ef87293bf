/**
 * The by-status count (issue 19's SessionsByStatus gauge, functions/usage/metering-pass.ts): a
 * Select COUNT query on the by-status index, page after page, against dynalite.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SESSION_STATUSES, type SessionStatus } from "../../functions/domain/session";
import { NON_TERMINAL_STATUSES } from "../../functions/domain/session-transitions";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let store: DynamoSessionStore;
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

/** Sessions in each status: starting stays, the others move through running. */
const WANTED: Record<SessionStatus, number> = { starting: 3, running: 5, paused: 2, error: 1, stopped: 4 };

beforeAll(async () => {
  table = await startTestTable();
  store = new DynamoSessionStore(table.doc, table.tableName);
  for (const status of SESSION_STATUSES) {
    for (let i = 0; i < WANTED[status]; i++) {
      const s = buildSession({ orgId: `org-${i % 2}` });
      await store.createSession(s);
      if (status === "starting") continue;
      const running = await store.transition(s, "running", at(1), { sandboxId: `sb-${s.id}` });
      if (status === "running") continue;
      await store.transition(running, status, at(2), status === "paused" ? { sandboxId: null, snapshotId: `snap-${s.id}`, pauseReason: "user" } : {});
    }
  }
});
afterAll(async () => table.close());

describe("countSessionsByStatus", () => {
  it("counts each status's sessions, however small its query pages", async () => {
    for (const pageLimit of [undefined, 1, 2, 100]) {
      const counts = Object.fromEntries(await Promise.all(SESSION_STATUSES.map(async (s) => [s, await store.countSessionsByStatus(s, pageLimit)] as const)));
      expect(counts, `page limit ${pageLimit}`).toEqual(WANTED);
    }
  });

  it("agrees with listing the index, and follows a move to another status", async () => {
    const listed = await store.listSessionsByStatus("running", { limit: 100 });
    expect(await store.countSessionsByStatus("running")).toBe(listed.items.length);
    const [first] = listed.items;
    if (!first) throw new Error("no running session");
    await store.transition(first, "stopped", at(3));
    expect(await store.countSessionsByStatus("running", 2)).toBe(WANTED.running - 1);
    expect(await store.countSessionsByStatus("stopped", 2)).toBe(WANTED.stopped + 1);
  });

  it("the gauge's statuses are the ones a session can leave", () => {
    expect(NON_TERMINAL_STATUSES).toEqual(["starting", "running", "paused", "error"]);
  });
});
