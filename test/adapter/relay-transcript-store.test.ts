/** The transcript store (store/dynamo-transcript.ts) against dynalite: idempotent upserts, order, session-scoped cursors. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ValidationError } from "../../functions/domain/errors";
import type { TranscriptMessage } from "../../functions/ports/transcript";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let transcript: DynamoTranscriptStore;

beforeAll(async () => {
  table = await startTestTable();
  transcript = new DynamoTranscriptStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

function message(sessionId: string, messageId: string, createdAt: string, overrides: Partial<TranscriptMessage> = {}): TranscriptMessage {
  return {
    sessionId,
    messageId,
    role: "assistant",
    text: `text of ${messageId}`,
    parts: [{ partId: `prt_${messageId}`, type: "text", text: `text of ${messageId}` }],
    createdAt,
    completedAt: createdAt,
    ...overrides,
  };
}

async function all(sessionId: string, limit: number): Promise<TranscriptMessage[]> {
  const items: TranscriptMessage[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page = await transcript.list(sessionId, { limit, cursor });
    items.push(...page.items);
    cursor = page.nextCursor;
    pages++;
  } while (cursor && pages < 50);
  return items;
}

describe("DynamoTranscriptStore", () => {
  it("upserting the same message twice (a relay catching up after a takeover) stores it once, with the latest content", async () => {
    const first = message("ses_a", "msg_1", "2026-11-01T10:00:00.000Z", { text: "partial", completedAt: null });
    await transcript.upsert(first);
    await transcript.upsert({ ...first, text: "final", completedAt: "2026-11-01T10:00:05.000Z" });
    await transcript.upsert({ ...first, text: "final", completedAt: "2026-11-01T10:00:05.000Z" });
    expect(await all("ses_a", 10)).toEqual([{ ...first, text: "final", completedAt: "2026-11-01T10:00:05.000Z" }]);
  });

  it("lists oldest first by the agent's creation time, whatever the write order, across pages", async () => {
    const times = ["2026-11-01T10:00:03.000Z", "2026-11-01T10:00:01.000Z", "2026-11-01T10:00:02.000Z", "2026-11-01T10:00:00.000Z"];
    for (const [i, t] of times.entries()) await transcript.upsert(message("ses_b", `msg_${i}`, t, { role: i % 2 ? "user" : "assistant" }));
    await transcript.upsert(message("ses_other", "msg_x", "2026-11-01T09:00:00.000Z"));
    const listed = await all("ses_b", 3);
    expect(listed.map((m) => m.messageId)).toEqual(["msg_3", "msg_1", "msg_2", "msg_0"]);
  });

  it("rejects a cursor minted for another session, and garbage", async () => {
    for (let i = 0; i < 3; i++) await transcript.upsert(message("ses_c", `msg_${i}`, `2026-11-01T10:00:0${i}.000Z`));
    const page = await transcript.list("ses_c", { limit: 1 });
    expect(page.nextCursor).not.toBeNull();
    await expect(transcript.list("ses_d", { limit: 1, cursor: page.nextCursor })).rejects.toBeInstanceOf(ValidationError);
    await expect(transcript.list("ses_c", { limit: 1, cursor: "garbage" })).rejects.toMatchObject({ code: "invalid_cursor" });
    const next = await transcript.list("ses_c", { limit: 1, cursor: page.nextCursor });
    expect(next.items.map((m) => m.messageId)).toEqual(["msg_1"]);
  });

  it("refuses a record that does not parse (nothing half-written)", async () => {
    await expect(transcript.upsert({ ...message("ses_e", "msg_1", "not a time") })).rejects.toThrow();
    expect(await all("ses_e", 10)).toEqual([]);
  });
});
