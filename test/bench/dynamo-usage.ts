/**
 * DynamoDB request counting for the benchmark sections: wraps a document client's `send`, asks
 * dynalite for each request's consumed capacity and turns it into on-demand capacity units,
 * adding the GSI writes dynalite leaves out. A benchmark probe, not an API.
 */

/** us-east-1 on-demand list prices (assumption, see the printed notes). */
export const USD_PER_WRU = 1.25 / 1_000_000;
export const USD_PER_RRU = 0.25 / 1_000_000;
/** Session items are indexed in GSI1 (byOrg) and GSI2 (byStatus), both projecting ALL (GSI3, sparse: `relayIndexWrites`). */
export const SESSION_GSI_COUNT = 2;
/** The key attributes of each GSI a session item is in (functions/store/table-layout.ts). */
const SESSION_GSI_KEYS = [
  ["GSI1PK", "GSI1SK"],
  ["GSI2PK", "GSI2SK"],
] as const;

const DYNAMO_OP: Record<string, string> = {
  GetCommand: "GetItem",
  PutCommand: "PutItem",
  UpdateCommand: "UpdateItem",
  QueryCommand: "Query",
  DeleteCommand: "DeleteItem",
  BatchGetCommand: "BatchGetItem",
  BatchWriteCommand: "BatchWriteItem",
};
export const WRITE_OPS = new Set(["PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"]);

interface SendableCommand {
  constructor: { name: string };
  input: Record<string, unknown>;
}
type Send = (command: SendableCommand) => Promise<{ ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[] }>;

/** One counted request: `op` is the DynamoDB operation, suffixed when it failed. */
export interface DynamoRequest {
  op: string;
  rru: number;
  wru: number;
  /** GSI entries moved to a new key by this write (a delete plus a put in that index: +1 WRU each). */
  gsiKeyMoves: number;
}

/** The session item itself (`SESSION#<id>` / `SESSION`); prompts, events and connections share its partition but no GSI. */
function isSessionItem(input: Record<string, unknown>): boolean {
  const key = (input.Key ?? input.Item) as { PK?: unknown; SK?: unknown } | undefined;
  return typeof key?.PK === "string" && key.PK.startsWith("SESSION#") && key.SK === "SESSION";
}

/** The session items a BatchWriteItem puts (each also writes its GSI entries). */
function batchSessionPuts(input: Record<string, unknown>): number {
  const requests = Object.values((input.RequestItems ?? {}) as Record<string, { PutRequest?: { Item?: Record<string, unknown> } }[]>).flat();
  return requests.filter((r) => r.PutRequest?.Item && isSessionItem({ Item: r.PutRequest.Item })).length;
}

/** Capacity units a response reports: one entry for a single-item request, one per table for a batch. */
function unitsOf(consumed: { CapacityUnits?: number } | { CapacityUnits?: number }[] | undefined): number | undefined {
  if (Array.isArray(consumed)) return consumed.length > 0 ? consumed.reduce((sum, c) => sum + (c.CapacityUnits ?? 0), 0) : undefined;
  return consumed?.CapacityUnits;
}

/**
 * GSI3 (byRelay: keyed on `relayOwner`, projecting the claim view only) is written by a session
 * write that sets or removes `relayOwner` (a claim, a release, a seize): +1 WRU, and +1 more when a
 * claim moves the key from a previous owner (a takeover: a delete plus a put there). Writes that
 * change another projected attribute while a relay is named (a runtime change under a seize) are
 * left out: each comes with a seize or release that is counted.
 */
function relayIndexWrites(op: string, input: Record<string, unknown>): number {
  if (op !== "UpdateItem" && op !== "PutItem") return 0;
  const names = new Set(Object.values((input.ExpressionAttributeNames ?? {}) as Record<string, string>));
  const item = (input.Item ?? {}) as Record<string, unknown>;
  if (!names.has("relayOwner") && !("relayOwner" in item)) return 0;
  const values = (input.ExpressionAttributeValues ?? {}) as Record<string, unknown>;
  return ":seenOwner" in values ? 2 : 1;
}

/** How many of the session item's GSIs an UpdateItem re-keys (it SETs that index's key attributes). */
function gsiKeyMoves(op: string, input: Record<string, unknown>): number {
  if (op !== "UpdateItem") return 0;
  const names = new Set(Object.values((input.ExpressionAttributeNames ?? {}) as Record<string, string>));
  const expression = typeof input.UpdateExpression === "string" ? input.UpdateExpression : "";
  return SESSION_GSI_KEYS.filter((index) => index.some((attr) => names.has(attr) || expression.includes(attr))).length;
}

/**
 * Counts every request sent through `doc` (the document client the stores share). Returns false
 * when `doc` is not a client with a `send` method (nothing is counted then).
 */
export function countDynamoRequests(doc: unknown, onRequest: (request: DynamoRequest) => void): boolean {
  const client = doc as { send?: Send } | undefined;
  if (!client || typeof client.send !== "function") return false;
  const send = client.send.bind(client) as Send;
  client.send = async (command: SendableCommand) => {
    const op = DYNAMO_OP[command.constructor.name] ?? command.constructor.name;
    const isWrite = WRITE_OPS.has(op);
    command.input.ReturnConsumedCapacity = "TOTAL";
    try {
      const out = await send(command);
      const units = unitsOf(out.ConsumedCapacity) ?? (isWrite ? 1 : 0.5);
      if (!isWrite) {
        onRequest({ op, rru: units, wru: 0, gsiKeyMoves: 0 });
      } else if (op === "BatchWriteItem") {
        onRequest({ op, rru: 0, wru: units + batchSessionPuts(command.input) * SESSION_GSI_COUNT, gsiKeyMoves: 0 });
      } else if (isSessionItem(command.input)) {
        const moves = gsiKeyMoves(op, command.input);
        onRequest({ op, rru: 0, wru: units * (1 + SESSION_GSI_COUNT + moves) + relayIndexWrites(op, command.input), gsiKeyMoves: moves });
      } else {
        onRequest({ op, rru: 0, wru: units, gsiKeyMoves: 0 });
      }
      return out;
    } catch (err) {
      const failedCondition = (err as { name?: string }).name === "ConditionalCheckFailedException";
      // A failed conditional write still consumes write capacity (1 WRU for an item under 1 KB), and writes no GSI.
      onRequest({ op: failedCondition ? `${op} (condition failed)` : `${op} (error)`, rru: 0, wru: failedCondition && isWrite ? 1 : 0, gsiKeyMoves: 0 });
      throw err;
    }
  };
  return true;
}

/** The printed assumptions behind the capacity-unit estimates. */
export function dynamoCostNotes(): string[] {
  return [
    "DynamoDB: us-east-1 on-demand list prices, $1.25 per million WRU and $0.25 per million RRU;",
    "items < 1 KB (1 WRU per write per KB); strongly consistent read = 1 RRU per 4 KB, eventually consistent = 0.5",
    "(session GetItem is strongly consistent; token GetItem and GSI Query are eventually consistent; a Query is",
    "billed on the summed size of the items it reads, rounded up to 4 KB); a session write also writes its",
    `${SESSION_GSI_COUNT} GSI entries (projection ALL) at +1 WRU each, and +1 more per GSI whose key it changes`,
    "(GSI2 is keyed on status#updatedAt, so every status/field update re-keys it: a delete plus a put there);",
    "GSI3 (byRelay, keyed on relayOwner, projecting the claim view) costs +1 WRU per claim, release or seize, +2 for a takeover's claim;",
    "prompts, events and connections are in no GSI; a failed conditional write costs 1 WRU.",
  ];
}
