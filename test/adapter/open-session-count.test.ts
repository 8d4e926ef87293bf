/**
 * The open-session count behind ORG_MAX_OPEN_SESSIONS (issue 14 §7), on dynalite: a marker per
 * session written at create and deleted when the session stops, counted per org; a marker left
 * behind by a lost delete is dropped by the reconciling count, which is exact.
 */
import { PutCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConflictError } from "../../functions/domain/errors";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
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

async function markers(orgId: string): Promise<string[]> {
  const out = await table.doc.send(
    new QueryCommand({
      TableName: table.tableName,
      KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
      ExpressionAttributeValues: { ":pk": keys.orgPartition(orgId), ":prefix": keys.openSessionPrefix },
    }),
  );
  return (out.Items ?? []).map((i) => String(i.sessionId)).sort();
}

describe("createSession", () => {
  it("a freshly generated id: the session and its marker in one batch write, counted like any other", async () => {
    const s = buildSession({ orgId: "org-fresh" });
    const client = table.doc as unknown as { send: (command: { constructor: { name: string } }) => Promise<unknown> };
    const send = client.send.bind(client);
    const sent: string[] = [];
    client.send = (command) => {
      sent.push(command.constructor.name);
      return send(command);
    };
    try {
      await store.createSession(s, { freshId: true });
    } finally {
      client.send = send;
    }
    expect(sent).toEqual(["BatchWriteCommand"]);
    expect(await store.getSession(s.id)).toEqual(s);
    expect(await markers("org-fresh")).toEqual([s.id]);
    expect(await store.countOpenSessions("org-fresh")).toBe(1);
  });

  it("an id the caller chose keeps the condition: a second create with it is a conflict and changes nothing", async () => {
    const s = buildSession({ orgId: "org-chosen", title: "first" });
    await store.createSession(s);
    await expect(store.createSession({ ...s, title: "second" })).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getSession(s.id))?.title).toBe("first");
    expect(await markers("org-chosen")).toEqual([s.id]);
  });
});

describe("countOpenSessions", () => {
  it("counts the org's sessions that are not stopped, and only that org's", async () => {
    const a = [buildSession({ orgId: "org-count" }), buildSession({ orgId: "org-count" }), buildSession({ orgId: "org-count" })];
    for (const s of a) await store.createSession(s);
    await store.createSession(buildSession({ orgId: "org-elsewhere" }));
    expect(await store.countOpenSessions("org-count")).toBe(3);

    // Paused and error sessions stay open: they can resume.
    const [first, second, third] = a as [ReturnType<typeof buildSession>, ReturnType<typeof buildSession>, ReturnType<typeof buildSession>];
    const running = await store.transition(first, "running", later(1), { sandboxId: "sb-1" });
    await store.transition(running, "paused", later(2), { sandboxId: null, snapshotId: "snap-1", pauseReason: "user" });
    await store.transition(second, "error", later(2), { errorMessage: "boom" });
    expect(await store.countOpenSessions("org-count")).toBe(3);

    await store.transition(third, "stopped", later(3));
    expect(await store.countOpenSessions("org-count")).toBe(2);
    expect(await markers("org-count")).toEqual([first.id, second.id].sort());
    expect(await store.countOpenSessions("org-elsewhere")).toBe(1);
  });

  it("a marker whose session stopped without deleting it counts until a reconciling count removes it", async () => {
    const open = buildSession({ orgId: "org-leak" });
    const leaked = buildSession({ orgId: "org-leak" });
    await store.createSession(open);
    await store.createSession(leaked);
    await store.transition(leaked, "stopped", later(1));
    // The stop's marker delete was lost (a crash between the two writes), and a marker of a session that never existed.
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...keys.openSession("org-leak", leaked.id), sessionId: leaked.id } }));
    await table.doc.send(new PutCommand({ TableName: table.tableName, Item: { ...keys.openSession("org-leak", "ses_gone"), sessionId: "ses_gone" } }));
    expect(await store.countOpenSessions("org-leak")).toBe(3);

    expect(await store.countOpenSessions("org-leak", { reconcile: true })).toBe(1);
    expect(await markers("org-leak")).toEqual([open.id]);
    expect(await store.countOpenSessions("org-leak")).toBe(1);
  });
});
