/**
 * WebSocket connect tickets in dynalite (API.md v1.1, issue 14 item 5): only the ticket's SHA-256
 * is stored, and consuming is one conditional write, so concurrent connects with one ticket
 * yield exactly one grant and a replay none.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { newWsTicket } from "../../functions/domain/ids";
import type { WsTicketGrant } from "../../functions/ports/ws-tickets";
import { hashToken } from "../../functions/store/dynamo-session-store";
import { DynamoWsTicketStore } from "../../functions/store/dynamo-ws-tickets";
import { keys } from "../../functions/store/table-layout";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let store: DynamoWsTicketStore;
const NOW = new Date("2026-01-01T00:00:00.000Z");
const grant: WsTicketGrant = { sessionId: "ses_a", userId: "u", orgId: "o", role: "member", tokenHash: "ab".repeat(32), expiresAt: "2026-01-01T00:01:00.000Z" };

beforeAll(async () => {
  table = await startTestTable();
  store = new DynamoWsTicketStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

it("stores only the ticket's hash, and grants once", async () => {
  const ticket = newWsTicket();
  await store.issue(ticket, grant, NOW);
  const item = (await table.doc.send(new GetCommand({ TableName: table.tableName, Key: keys.wsTicket(hashToken(ticket)) }))).Item;
  expect(item).toMatchObject({ ...grant, ttl: Date.parse(grant.expiresAt) / 1000 + 3600 });
  expect(JSON.stringify(item)).not.toContain(ticket);
  expect(await store.consume(ticket, NOW)).toEqual(grant);
  expect(await store.consume(ticket, NOW)).toBeNull();
  expect(await store.consume(newWsTicket(), NOW)).toBeNull();
});

it("race: 20 concurrent consumes of one ticket, exactly one gets the grant", async () => {
  const ticket = newWsTicket();
  await store.issue(ticket, grant, NOW);
  const results = await Promise.all(Array.from({ length: 20 }, () => store.consume(ticket, NOW)));
  expect(results.filter((r) => r !== null)).toEqual([grant]);
});

it("an unknown ticket creates no item", async () => {
  const ticket = newWsTicket();
  expect(await store.consume(ticket, NOW)).toBeNull();
  expect((await table.doc.send(new GetCommand({ TableName: table.tableName, Key: keys.wsTicket(hashToken(ticket)) }))).Item).toBeUndefined();
});
