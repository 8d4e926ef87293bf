/**
 * The prompt queue's keyed stores (store/dynamo-session-items.ts `enqueueOnce`) against dynalite:
 * one prompt per key under concurrent twins, repeats, and a crash between the key item and the
 * prompt item.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { newSessionId } from "../../functions/domain/ids";
import { promptIdForKey } from "../../functions/domain/idempotency-key";
import { DynamoPromptQueue } from "../../functions/store/dynamo-session-items";
import { keys } from "../../functions/store/table-layout";
import { T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let prompts: DynamoPromptQueue;
beforeAll(async () => {
  table = await startTestTable();
  prompts = new DynamoPromptQueue(table.doc, table.tableName);
});
afterAll(async () => table.close());

const at = (ms: number) => new Date(T0.getTime() + ms);

describe("DynamoPromptQueue.enqueueOnce", () => {
  it("concurrent twins and a later repeat store one prompt; the first's createdAt wins", async () => {
    const sessionId = newSessionId();
    const promptId = promptIdForKey("org-a", sessionId, "slack:C1:1.2");
    const input = { sessionId, promptId, content: "hi", source: "user:u" };
    const twins = await Promise.all([prompts.enqueueOnce({ ...input, now: at(0) }), prompts.enqueueOnce({ ...input, now: at(5) })]);
    expect(twins.filter((t) => t.fresh)).toHaveLength(1);
    const later = await prompts.enqueueOnce({ ...input, now: at(60_000) });
    expect(later.fresh).toBe(false);
    const stored = await prompts.list(sessionId);
    expect(stored).toHaveLength(1);
    expect(later.prompt).toEqual(stored[0]);
    expect(await prompts.getKeyed(sessionId, promptId)).toEqual(stored[0]);
  });

  it("a crash after the key item, before the prompt item: the repeat stores the prompt under the key's createdAt", async () => {
    const sessionId = newSessionId();
    const promptId = promptIdForKey("org-a", sessionId, "k1");
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...keys.promptKey(sessionId, promptId), promptId, createdAt: at(0).toISOString() } }));
    expect(await prompts.getKeyed(sessionId, promptId)).toBeNull();
    const repeat = await prompts.enqueueOnce({ sessionId, promptId, content: "hi", source: "user:u", now: at(90_000) });
    expect(repeat.fresh).toBe(true);
    expect(repeat.prompt.createdAt).toBe(at(0).toISOString());
    expect((await prompts.list(sessionId)).map((p) => p.promptId)).toEqual([promptId]);
  });

  it("a repeat after the prompt finished (and left the queue's key range) stores nothing", async () => {
    const sessionId = newSessionId();
    const promptId = promptIdForKey("org-a", sessionId, "slack:C1:9.9");
    const input = { sessionId, promptId, content: "once", source: "user:u" };
    const { prompt } = await prompts.enqueueOnce({ ...input, now: at(0) });
    expect(await prompts.move(prompt, "queued", "processing", at(1))).toBe(true);
    expect(await prompts.move(prompt, "processing", "completed", at(2))).toBe(true);
    const repeat = await prompts.enqueueOnce({ ...input, now: at(60_000) });
    expect(repeat).toEqual({ prompt: { ...prompt, status: "completed", updatedAt: at(2).toISOString() }, fresh: false });
    expect(await prompts.listOpen(sessionId)).toEqual([]);
    expect((await prompts.list(sessionId)).map((p) => p.status)).toEqual(["completed"]);
  });

  it("ids differ per org, session and key, and are stable", () => {
    expect(promptIdForKey("o", "s", "k")).toBe(promptIdForKey("o", "s", "k"));
    expect(new Set([promptIdForKey("o", "s", "k"), promptIdForKey("o2", "s", "k"), promptIdForKey("o", "s2", "k"), promptIdForKey("o", "s", "k2")]).size).toBe(4);
    expect(promptIdForKey("o", "s", "k")).toMatch(/^prm_k[0-9a-z]{26}$/);
  });
});
