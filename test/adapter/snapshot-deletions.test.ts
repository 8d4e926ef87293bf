/**
 * The pending snapshot deletion queue in dynalite (issue 22 §4): one item per provider +
 * snapshot, a failed attempt recorded again counts one more attempt and keeps when it was first
 * recorded, listing reads every page, and removal is idempotent.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { DynamoSnapshotDeletionQueue } from "../../functions/store/dynamo-snapshot-deletions";
import { QueryCommand, type DynamoDBDocumentClient } from "../../functions/store/dynamodb-sdk";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let queue: DynamoSnapshotDeletionQueue;
const T0 = new Date("2026-01-01T00:00:00.000Z");
const T1 = new Date("2026-01-01T00:10:00.000Z");

beforeAll(async () => {
  table = await startTestTable();
  queue = new DynamoSnapshotDeletionQueue(table.doc, table.tableName);
});
afterAll(async () => table.close());

it("records a failure once per snapshot, counting attempts; the first time stays, the last error wins", async () => {
  await queue.recordFailure({ provider: "modal", snapshotId: "im-1", sessionId: "ses_a", error: "unavailable" }, T0);
  await queue.recordFailure({ provider: "modal", snapshotId: "im-1", sessionId: "ses_a", error: "deadline exceeded" }, T1);
  // The same id at another provider is another snapshot.
  await queue.recordFailure({ provider: "e2b", snapshotId: "im-1", sessionId: null, error: "x".repeat(2_000) }, T0);
  const listed = await queue.list();
  expect(listed).toEqual([
    { provider: "e2b", snapshotId: "im-1", sessionId: null, recordedAt: T0.toISOString(), lastAttemptAt: T0.toISOString(), attempts: 1, lastError: "x".repeat(500) },
    { provider: "modal", snapshotId: "im-1", sessionId: "ses_a", recordedAt: T0.toISOString(), lastAttemptAt: T1.toISOString(), attempts: 2, lastError: "deadline exceeded" },
  ]);
  await queue.remove("modal", "im-1");
  await queue.remove("modal", "im-1");
  expect((await queue.list()).map((p) => p.provider)).toEqual(["e2b"]);
  await queue.remove("e2b", "im-1");
});

it("lists every pending deletion across pages", async () => {
  await Promise.all(Array.from({ length: 120 }, (_, i) => queue.recordFailure({ provider: "local", snapshotId: `lsnap_${i}`, sessionId: null, error: "e" }, T0)));
  // Pages of 50 (DynamoDB pages at 1 MB; a small limit makes the same continuation happen here).
  let queries = 0;
  const paged = {
    send: (command: { input: Record<string, unknown> }) => {
      if (command instanceof QueryCommand) {
        queries++;
        command.input.Limit = 50;
      }
      return table.doc.send(command as never);
    },
  } as unknown as DynamoDBDocumentClient;
  const listed = await new DynamoSnapshotDeletionQueue(paged, table.tableName).list();
  expect(listed).toHaveLength(120);
  expect(new Set(listed.map((p) => p.snapshotId)).size).toBe(120);
  expect(queries).toBe(3);
});
