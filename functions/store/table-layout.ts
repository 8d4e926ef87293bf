/**
 * DynamoDB single-table key layout. One table holds every item; the CDK stack and the local
 * runtime both create it from `TABLE_DEFINITION`, so the two can never drift.
 *
 * Session items that name a relay (or a flow's seize) are also in GSI3 (byRelay), keyed on `relayOwner`.
 *
 * | item                | PK                      | SK              | GSI1 (byOrg)                              | GSI2 (byStatus)                          |
 * |---------------------|-------------------------|-----------------|-------------------------------------------|------------------------------------------|
 * | session             | `SESSION#<sessionId>`   | `SESSION`       | `ORG#<orgId>` / `<createdAt>#<sessionId>` | `STATUS#<status>` / `<updatedAt>#<id>`   |
 * | API token           | `APITOKEN#<sha256 hex>` | `APITOKEN`      | -                                         | -                                        |
 * | API token id lookup | `APITOKENID#<tokenId>`  | `APITOKENID`    | -                                         | -                                        |
 * | token's connection  | `APITOKENID#<tokenId>`  | `CONN#<connectionId>`           | -                         | -                                        |
 * | WebSocket ticket    | `WSTICKET#<sha256 hex>` | `WSTICKET`      | -                                         | -                                        |
 * | queued/processing prompt | `SESSION#<sessionId>`   | `PROMPT#<createdAt>#<promptId>` | -                         | -                                        |
 * | finished prompt     | `SESSION#<sessionId>`   | `PROMPTDONE#<createdAt>#<promptId>` | -                     | -                                        |
 * | prompt's key        | `SESSION#<sessionId>`   | `PROMPTKEY#<promptId>`          | -                         | -                                        |
 * | lifecycle event     | `SESSION#<sessionId>`   | `EVENT#<at>#<eventId>`          | -                         | -                                        |
 * | client connection   | `SESSION#<sessionId>`   | `CONN#<connectionId>`           | -                         | -                                        |
 * | connection lookup   | `WSCONN#<connectionId>` | `WSCONN`                        | -                         | -                                        |
 * | transcript message  | `SESSION#<sessionId>`   | `MSG#<createdAt>#<messageId>`   | -                         | -                                        |
 * | proxy connection    | `SESSION#<sessionId>`   | `PROXY#<proxyId>`               | -                         | -                                        |
 * | org secret          | `ORG#<orgId>`           | `SECRET#<name>`                 | -                         | -                                        |
 * | org settings        | `ORG#<orgId>`           | `SETTINGS`                      | -                         | -                                        |
 * | open-session marker | `ORG#<orgId>`           | `OPENSESSION#<sessionId>`       | -                         | -                                        |
 * | usage (interval-day) | `ORG#<orgId>`          | `USAGE#<day>#<sessionId>#<runningSince>` | -                | -                                        |
 * | org limits          | `ORG#<orgId>`           | `LIMITS`                        | -                         | -                                        |
 * | pending snapshot deletion | `SNAPSHOTDELETION` | `<provider>#<snapshotId>`      | -                         | -                                        |
 *
 * Client connections, their lookups and proxy connections carry `ttl` (epoch seconds, the table's
 * TTL attribute) next to their ISO `expiresAt`: DynamoDB deletes them some time after they expire,
 * and readers filter on `expiresAt` meanwhile (dynalite never deletes).
 *
 * Prompts, events and connections live in the session's partition, so one Query with a
 * `begins_with` on SK reads a session's queue, audit trail, client set or transcript in order.
 * Transcript messages sort by the agent's creation time; the same agent message always maps to
 * the same key, so the relay's upserts are idempotent. Relay ownership (issue 15,
 * ./dynamo-relay-store.ts): one heartbeat item per relay process (`RELAYS` / `RELAY#<owner>`) and,
 * on the session item, `relayOwner`, `relayEpoch`, `relaySandbox`, `relayFence` (`relayExpiresAt`
 * for a flow's seize), apart from the flow lease; nudges for the relays go through SQS
 * (functions/adapters/aws/sqs-relay-nudge.ts), not the table.
 *
 * Access patterns:
 * - get a session: GetItem PK=`SESSION#id`, SK=`SESSION` (strongly consistent for flows);
 * - list an org's sessions newest first: Query GSI1 PK=`ORG#org`, ScanIndexForward=false
 *   (with a `status` filter when asked: the page is filled by reading on, never by skipping);
 * - list sessions in one status (sweeper, operators): Query GSI2 PK=`STATUS#status`;
 * - relay scan (backstop): Query GSI2 PK=`STATUS#running`, kept when no live relay holds it (Query `RELAYS` for the live ones);
 * - a dead relay's sessions (takeover): Query GSI3 PK=`<relayOwner>` (sparse: only session items that name
 *   a relay or a flow's seize; projects the claim view only, so the turn's writes never touch it);
 * - a session's transcript oldest first: Query PK=`SESSION#id`, SK begins_with `MSG#`;
 * - a session's live proxy connections: Query PK=`SESSION#id`, SK begins_with `PROXY#`, filtered on expiry;
 * - count an org's open sessions (the ORG_MAX_OPEN_SESSIONS cap): Query PK=`ORG#org`, SK begins_with
 *   `OPENSESSION#` (one marker per session not stopped: written at create, deleted when it stops);
 * - resolve an API token: GetItem PK=`APITOKEN#sha256(token)` (the token itself is never stored).
 * - revoke a token by id (`tok_` + the first 20 hex of its SHA-256): GetItem `APITOKENID#id` for the
 *   hash, then Query the same partition's `CONN#` items for the WebSocket connections it opened.
 * - consume a WebSocket connect ticket: a conditional UpdateItem on `WSTICKET#sha256(ticket)`.
 * - an org's secrets by name: Query PK=`ORG#org`, SK begins_with `SECRET#` (metadata only, projected);
 *   the values a session names: BatchGetItem on `ORG#org` / `SECRET#name` (ciphertext only: the value
 *   is envelope-encrypted, functions/secrets/envelope-cipher.ts).
 */

export const GSI_BY_ORG = "GSI1";
export const GSI_BY_STATUS = "GSI2";
/**
 * Sparse, keyed on the session item's `relayOwner` (issue 15): a relay whose peer died reads that
 * peer's sessions, not every running one. Projects what a claim needs (ports/relay.ts `ClaimView`),
 * so only a claim, a release, a seize or a change of runtime writes it, never a turn.
 */
export const GSI_BY_RELAY = "GSI3";
export const RELAY_INDEX_PROJECTION = ["id", "status", "sandboxId", "openCodeUrl", "codingAgentSessionId", "relayEpoch", "relaySandbox", "relayFence", "relayExpiresAt"] as const;

interface IndexDefinition {
  readonly indexName: string;
  readonly partitionKey: string;
  readonly sortKey?: string;
  /** Non-key attributes projected (INCLUDE); none: every attribute (ALL). */
  readonly projection?: readonly string[];
}

export const keys = {
  session: (sessionId: string) => ({ PK: `SESSION#${sessionId}`, SK: "SESSION" }),
  sessionByOrg: (orgId: string, createdAt: string, sessionId: string) => ({
    GSI1PK: `ORG#${orgId}`,
    GSI1SK: `${createdAt}#${sessionId}`,
  }),
  sessionByStatus: (status: string, updatedAt: string, sessionId: string) => ({
    GSI2PK: `STATUS#${status}`,
    GSI2SK: `${updatedAt}#${sessionId}`,
  }),
  orgPartition: (orgId: string) => `ORG#${orgId}`,
  statusPartition: (status: string) => `STATUS#${status}`,
  apiToken: (tokenHash: string) => ({ PK: `APITOKEN#${tokenHash}`, SK: "APITOKEN" }),
  apiTokenPrefix: "APITOKEN#",
  /** A token's public id to its hash; the same partition lists the connections it opened. */
  apiTokenId: (tokenId: string) => ({ PK: `APITOKENID#${tokenId}`, SK: "APITOKENID" }),
  apiTokenConnection: (tokenId: string, connectionId: string) => ({ PK: `APITOKENID#${tokenId}`, SK: `CONN#${connectionId}` }),
  apiTokenIdPartition: (tokenId: string) => `APITOKENID#${tokenId}`,
  wsTicket: (ticketHash: string) => ({ PK: `WSTICKET#${ticketHash}`, SK: "WSTICKET" }),
  prompt: (sessionId: string, createdAt: string, promptId: string) => ({ PK: `SESSION#${sessionId}`, SK: `PROMPT#${createdAt}#${promptId}` }),
  /** A completed or failed prompt, out of the queue's range (store/dynamo-session-items.ts `DynamoPromptQueue`). */
  finishedPrompt: (sessionId: string, createdAt: string, promptId: string) => ({ PK: `SESSION#${sessionId}`, SK: `PROMPTDONE#${createdAt}#${promptId}` }),
  /** An Idempotency-Key's prompt (its id derives from the key): where the prompt's `createdAt` is found. */
  promptKey: (sessionId: string, promptId: string) => ({ PK: `SESSION#${sessionId}`, SK: `PROMPTKEY#${promptId}` }),
  event: (sessionId: string, at: string, eventId: string) => ({ PK: `SESSION#${sessionId}`, SK: `EVENT#${at}#${eventId}` }),
  connection: (sessionId: string, connectionId: string) => ({ PK: `SESSION#${sessionId}`, SK: `CONN#${connectionId}` }),
  /** Reverse lookup for WebSocket frames, which carry only the connection id. */
  connectionLookup: (connectionId: string) => ({ PK: `WSCONN#${connectionId}`, SK: "WSCONN" }),
  sessionPartition: (sessionId: string) => `SESSION#${sessionId}`,
  message: (sessionId: string, createdAt: string, messageId: string) => ({ PK: `SESSION#${sessionId}`, SK: `MSG#${createdAt}#${messageId}` }),
  proxy: (sessionId: string, proxyId: string) => ({ PK: `SESSION#${sessionId}`, SK: `PROXY#${proxyId}` }),
  /** An org secret; the org's partition (`ORG#<orgId>` in the table, not in GSI1) holds its secrets in name order. */
  secret: (orgId: string, name: string) => ({ PK: `ORG#${orgId}`, SK: `SECRET#${name}` }),
  secretPrefix: "SECRET#",
  /** One per session of the org that is not stopped: what the open-session cap counts (cost bounded by the cap, not by history). */
  openSession: (orgId: string, sessionId: string) => ({ PK: `ORG#${orgId}`, SK: `OPENSESSION#${sessionId}` }),
  openSessionPrefix: "OPENSESSION#",
  /** An org's settings (its default agent model); one item per org. */
  orgSettings: (orgId: string) => ({ PK: `ORG#${orgId}`, SK: "SETTINGS" }),
  /**
   * Metered usage (API.md "Usage, limits and credits"): one item per running interval of a
   * session per UTC day it touches, keyed by the interval's start (functions/store/dynamo-org-usage.ts).
   * A day's usage is a Query on `USAGE#<day>`; a range of days, on `USAGE#<from>` .. `USAGE#<to>~`.
   */
  usage: (orgId: string, day: string, sessionId: string, intervalStart: string) => ({ PK: `ORG#${orgId}`, SK: `USAGE#${day}#${sessionId}#${intervalStart}` }),
  usagePrefix: "USAGE#",
  /** An org's usage limits and the sessions holding its running places; one item per org. */
  orgLimits: (orgId: string) => ({ PK: `ORG#${orgId}`, SK: "LIMITS" }),
  /**
   * A snapshot delete that failed, kept until the sweeper's retry succeeds (issue 22 §4). One
   * partition: the items exist only while a provider refuses deletes, and the sweeper reads them all.
   */
  snapshotDeletion: (provider: string, snapshotId: string) => ({ PK: "SNAPSHOTDELETION", SK: `${provider}#${snapshotId}` }),
  snapshotDeletionPartition: "SNAPSHOTDELETION",
} as const;

/** Key attributes that the store adds to domain records and strips from them. */
export const KEY_ATTRIBUTES = ["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"] as const;

/** The table's TTL attribute (epoch seconds): connection and proxy items expire by it. */
export const TTL_ATTRIBUTE = "ttl";

/** The table's key schema and indexes in CreateTable form (shared by CDK and the local runtime). */
export const TABLE_DEFINITION: {
  readonly partitionKey: "PK";
  readonly sortKey: "SK";
  readonly timeToLiveAttribute: typeof TTL_ATTRIBUTE;
  readonly globalSecondaryIndexes: readonly IndexDefinition[];
} = {
  partitionKey: "PK",
  sortKey: "SK",
  timeToLiveAttribute: TTL_ATTRIBUTE,
  globalSecondaryIndexes: [
    { indexName: GSI_BY_ORG, partitionKey: "GSI1PK", sortKey: "GSI1SK" },
    { indexName: GSI_BY_STATUS, partitionKey: "GSI2PK", sortKey: "GSI2SK" },
    { indexName: GSI_BY_RELAY, partitionKey: "relayOwner", projection: RELAY_INDEX_PROJECTION },
  ],
};
