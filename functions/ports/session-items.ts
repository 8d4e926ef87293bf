/**
 * Items that live in a session's partition next to the session item (store/table-layout.ts):
 * the durable prompt queue, the lifecycle audit log and the set of connected clients.
 * One adapter (store/dynamo-session-items.ts) serves AWS and dynalite alike.
 */
import * as z from "zod";

/**
 * Seed 001 prompt queue FSM: queued -> processing -> completed, processing -> queued on loss;
 * processing -> failed when the agent's turn ended in an error or was canceled (issue 25 §2).
 */
export const PROMPT_STATUSES = ["queued", "processing", "completed", "failed"] as const;
export type PromptStatus = (typeof PROMPT_STATUSES)[number];

/** Why a prompt `failed`: its turn's finish reason and the agent's error (redacted). */
export const PromptFailure = z.object({ reason: z.enum(["error", "canceled"]), code: z.string(), message: z.string() });
export type PromptFailure = z.infer<typeof PromptFailure>;

export const QueuedPrompt = z.object({
  promptId: z.string(),
  sessionId: z.string(),
  content: z.string(),
  status: z.enum(PROMPT_STATUSES),
  /** Who sent it: "user:<id>", "automation", ... */
  source: z.string(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  /** Set when `failed`. */
  failure: PromptFailure.optional(),
});
export type QueuedPrompt = z.infer<typeof QueuedPrompt>;

export interface PromptQueue {
  /** Appends a prompt in `queued`; ordering is by `createdAt` then id. */
  enqueue(input: { sessionId: string; content: string; source: string; now: Date }): Promise<QueuedPrompt>;
  /**
   * Stores the prompt whose id is `promptId` (derived from an Idempotency-Key) once: a repeat,
   * concurrent or after a crash at any point, returns the prompt stored first (`fresh: false`).
   */
  enqueueOnce(input: { sessionId: string; promptId: string; content: string; source: string; now: Date }): Promise<{ prompt: QueuedPrompt; fresh: boolean }>;
  /** The prompt stored under `promptId` by `enqueueOnce`, or null. */
  getKeyed(sessionId: string, promptId: string): Promise<QueuedPrompt | null>;
  /**
   * Prompts of a session in queue order, optionally in one status. Queued or processing reads
   * only the open prompts; all, completed or failed reads the session's whole history too.
   */
  list(sessionId: string, status?: PromptStatus): Promise<QueuedPrompt[]>;
  /** The queued and processing prompts in queue order: a read that does not grow with the session's history. */
  listOpen(sessionId: string): Promise<QueuedPrompt[]>;
  /**
   * Moves a prompt from `from` to `to` if it is still in `from`; false when another actor moved
   * it first (so exactly one dispatcher ever sends a given prompt). A completed or failed prompt
   * never moves again (false).
   */
  move(prompt: Pick<QueuedPrompt, "sessionId" | "promptId" | "createdAt">, from: PromptStatus, to: PromptStatus, now: Date, changes?: { failure?: PromptFailure }): Promise<boolean>;
}

export const LIFECYCLE_OUTCOMES = ["committed", "skipped", "failed", "superseded"] as const;
export type LifecycleOutcome = (typeof LIFECYCLE_OUTCOMES)[number];

/** One audit entry (API.md `GET /v1/sessions/{id}/events`). */
export const LifecycleEvent = z.object({
  eventId: z.string(),
  sessionId: z.string(),
  at: z.iso.datetime(),
  flow: z.string(),
  outcome: z.enum(LIFECYCLE_OUTCOMES),
  /** Stored statuses before and after; equal when the flow changed no status (snapshot, migration). */
  from: z.string().nullable(),
  to: z.string().nullable(),
  reason: z.string().nullable(),
  actor: z.string(),
  execution: z.string(),
  sandboxId: z.string().nullable(),
  previousSandboxId: z.string().nullable(),
  message: z.string().nullable(),
  /** Milliseconds per flow step, in execution order. */
  timings: z.record(z.string(), z.number()),
  /** The snapshot the flow took (snapshot, pause, migration), so a caller can tell which one was its. */
  snapshotId: z.string().nullable().optional(),
  /** The snapshot layer a provisioned sandbox started from (seed 003 §6.5) and its id; absent when nothing was provisioned. */
  snapshotLayer: z.enum(["session", "prebuild", "repo", "base", "none"]).nullable().optional(),
  startedFrom: z.string().nullable().optional(),
});
export type LifecycleEvent = z.infer<typeof LifecycleEvent>;

export interface LifecycleEventLog {
  /** Idempotent per `eventId`: appending the same event twice (a retried step) stores it once. */
  append(event: LifecycleEvent): Promise<LifecycleEvent>;
  /** Oldest first; `cursor` from a previous page. */
  list(sessionId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: LifecycleEvent[]; nextCursor: string | null }>;
  /** The event of one execution (`eventId`) recorded at or after `notBefore`, or null (not finished yet). */
  findByExecution(sessionId: string, execution: string, notBefore: Date): Promise<LifecycleEvent | null>;
}

export const ClientConnection = z.object({
  connectionId: z.string(),
  sessionId: z.string(),
  userId: z.string(),
  clientType: z.string(),
  connectedAt: z.iso.datetime(),
  /** Set once the connection was sent its `init`: pushes before that would arrive ahead of it. */
  ready: z.boolean().default(false),
  /** The API token it was opened with (its public id) and that token's expiry (issue 14 item 5). */
  tokenId: z.string().optional(),
  tokenExpiresAt: z.iso.datetime().nullish(),
  /** Set by revoking its token: `$default` refuses its frames and closes it. */
  revokedAt: z.iso.datetime().optional(),
  /**
   * Past this the connection no longer counts as present (domain/connection-liveness.ts);
   * activity moves it forward. Absent on items written before it existed.
   */
  expiresAt: z.iso.datetime().optional(),
});
export type ClientConnection = z.input<typeof ClientConnection>;

/**
 * Connected WebSocket clients of a session. Add/remove are idempotent by construction. Items
 * carry a DynamoDB TTL, but DynamoDB deletes expired items only eventually (and dynalite never):
 * whoever counts clients reads `listLive`, which checks the expiry itself.
 */
export interface ConnectionRegistry {
  add(connection: ClientConnection): Promise<void>;
  remove(sessionId: string, connectionId: string): Promise<void>;
  /** Every item, expired ones included (broadcast prunes those). */
  list(sessionId: string): Promise<ClientConnection[]>;
  /** Connections not yet expired at `now`: the ones that count as present. */
  listLive(sessionId: string, now: Date): Promise<ClientConnection[]>;
  /** The connection's record by id alone (WebSocket frames carry no session id); null when gone. */
  lookup(connectionId: string): Promise<ClientConnection | null>;
  /** Marks the connection ready for pushes (its `init` was sent), with its new expiry; false when it is gone. */
  markReady(sessionId: string, connectionId: string, expiresAt?: Date): Promise<boolean>;
  /** Moves the connection's expiry forward (activity); false when it is gone (never re-creates it). */
  refresh(sessionId: string, connectionId: string, expiresAt: Date): Promise<boolean>;
}

/**
 * A proxy connection (seed 002 constraint 8, §11b): a terminal or editor WebSocket that reaches
 * the sandbox without being a client of the session's WebSocket API. Keyed by its id, so
 * registering twice or removing twice changes nothing (a set, never a counter). A registration
 * lives until `expiresAt`: the proxy refreshes it while open, so one that vanished without
 * saying so stops keeping the sandbox awake.
 */
export const ProxyConnection = z.object({
  proxyId: z.string(),
  sessionId: z.string(),
  kind: z.string(),
  openedAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
});
export type ProxyConnection = z.infer<typeof ProxyConnection>;

export interface ProxyConnectionRegistry {
  /** Registers or refreshes (same id: one entry, the later expiry). */
  put(connection: ProxyConnection): Promise<void>;
  /** Removes; a no-op when already gone. True when this call removed it. */
  remove(sessionId: string, proxyId: string): Promise<boolean>;
  /** Registrations not yet expired at `now`. */
  listLive(sessionId: string, now: Date): Promise<ProxyConnection[]>;
}
