/**
 * The JSON document a lifecycle flow carries from state to state (the Step Functions state
 * input). The execution input is `FlowInput`, the execution name included (the runners put it
 * there: the name is theirs to choose, and no Pass state has to add it);
 * every Task writes its result under its own key (`ResultPath: "$.<step>"`), so later steps and
 * the audit trail see what earlier ones did. Step handlers parse what they read with zod.
 */
import * as z from "zod";
import { AgentModel } from "../domain/agent-settings";
import { SessionRecord } from "../domain/session";
import { ClientConnection } from "../ports/session-items";
import { FLOW_NAMES } from "../ports/flow-runner";

export const FlowInput = z.object({
  sessionId: z.string().min(1),
  flow: z.enum(FLOW_NAMES),
  generation: z.union([z.number(), z.string()]),
  actor: z.string().min(1),
  reason: z.string().nullable().optional(),
  /** The execution's name: the lease owner. */
  execution: z.string().min(1),
  /** idle-snapshot: the time its Wait state held Begin until (StartFlowInput.notBefore). */
  notBefore: z.string().optional(),
});
export type FlowInput = z.infer<typeof FlowInput>;

export const LeaseDoc = z.object({ sessionId: z.string(), owner: z.string(), fence: z.number(), expiresAt: z.number() });

/** Migration with clients swaps the sandbox; with none it pauses (seed 002 constraint 11). */
export const MIGRATE_BRANCHES = ["migrate", "pause"] as const;

export const BeginResult = z.object({
  lease: LeaseDoc,
  proceed: z.boolean(),
  skipReason: z.string().nullable(),
  branch: z.enum(MIGRATE_BRANCHES).nullable(),
  /** The status clients were shown while the flow runs (null: nothing new shown). */
  progressStatus: z.string().nullable(),
  /** Stored status and sandbox when the lease was taken: what the flow acts on. */
  fromStatus: z.string(),
  sandboxId: z.string().nullable(),
  /** The snapshots the session referenced when the lease was taken (Finish deletes those it no longer does). */
  snapshotIds: z.array(z.string()).optional(),
  /** Idle snapshots: when the session's grace ran out (the idle-lag metric's start). */
  graceExpiresAt: z.string().nullable().optional(),
  /** The sandbox's expiry when the lease was taken (idle sandbox-seconds avoided). */
  sandboxExpiresAt: z.string().nullable().optional(),
  /** Idle snapshots and user pauses: the relay lease this flow took from the relay while it works (released by finish). */
  relayLease: LeaseDoc.nullable().optional(),
  /**
   * The session as the lease take left it (the write's ALL_NEW): later steps act on it instead of
   * reading it again. Only lease holders bump `version`, so under the lease it stays current for
   * every lifecycle field; the commit's version CAS catches anything else (issue 15).
   */
  session: SessionRecord.optional(),
  /**
   * `ensure-runtime` that proceeds for a session without its own model: the org's default model,
   * read with the org's limits in Begin's admission (one read: issue 15), so Provision does not
   * read it again. Null: the org has none (the deployment default). Absent: not read.
   */
  orgModel: AgentModel.nullable().optional(),
  /**
   * The live connections Begin listed for its progress push (all of them ready), and the
   * session's `clientConnects` then is `session.clientConnects`: Finish pushes to these instead
   * of listing again when its commit shows that count unchanged (issue 15). Absent: Finish lists.
   */
  connections: z.array(ClientConnection).optional(),
  startedAt: z.string(),
  /** The execution's start (`$$.Execution.StartTime`), when the ASL hands it to Begin (the user pause: issue 25 §1). */
  executionStartedAt: z.string().optional(),
  ms: z.number(),
});
export type BeginResult = z.infer<typeof BeginResult>;

export const ProvisionResult = z.object({
  sandboxId: z.string(),
  tunnelUrl: z.string(),
  expiresAt: z.number().nullable(),
  recovered: z.boolean(),
  codingAgentSessionId: z.string().nullable(),
  /** The key epoch the sandbox's sidecar holds (absent from documents written before epochs). */
  sandboxKeyEpoch: z.number().int().nonnegative().optional(),
  /** The snapshot layer the sandbox started from (seed 003 §6.5); null when an existing sandbox was recovered. */
  layer: z.enum(["session", "prebuild", "repo", "base", "none"]).nullable().optional(),
  /** The snapshot (or base) id it started from. */
  startedFrom: z.string().nullable().optional(),
  /** The sandbox's preview proxy (its exposed ports), when the provider has one. */
  previewUrl: z.string().nullable().optional(),
  ms: z.number(),
});
export type ProvisionResult = z.infer<typeof ProvisionResult>;

export const SnapshotStepResult = z.object({
  /** Null only when the sandbox was lost and the session never had a snapshot. */
  snapshotId: z.string().nullable(),
  /** `lost`: the provider no longer has the sandbox (idle snapshots only): nothing was snapshotted. */
  method: z.enum(["pause", "memory", "filesystem", "lost"]),
  /** Epoch ms the snapshot stops being restorable (a Modal memory snapshot); null/absent: kept until deleted. */
  expiresAt: z.number().nullable().optional(),
  /** The durable filesystem snapshot taken with an expiring one (issue 22 §3), and its expiry. */
  durableSnapshotId: z.string().nullable().optional(),
  durableExpiresAt: z.number().nullable().optional(),
  ms: z.number(),
});

export const TerminateResult = z.object({ sandboxId: z.string().nullable(), terminated: z.boolean(), ms: z.number() });

export const QuiesceResult = z.object({ waitedMs: z.number(), aborted: z.boolean(), ms: z.number() });

export const CommitResult = z.object({
  status: z.string(),
  sandboxId: z.string().nullable(),
  version: z.number(),
  /** The commit write also freed the flow's lease: Finish has nothing to release. */
  leaseReleased: z.boolean().optional(),
  /** The same write also freed the relay lease Begin seized (issue 15): Finish has nothing to release. */
  relayLeaseReleased: z.boolean().optional(),
  ms: z.number(),
});

/**
 * A Lambda function error's `Cause` as Step Functions writes it: the runtime's error payload as a
 * JSON string (`{"errorType", "errorMessage", "trace"}`, the stack included). Only the message
 * goes on: it reaches the session's `errorMessage`, lifecycle events and clients. Any other Cause
 * (a States.* error, the local runner's plain message) is kept as it is.
 */
export function causeMessage(cause: string): string {
  if (!cause.startsWith("{")) return cause;
  try {
    const payload = JSON.parse(cause) as { errorMessage?: unknown };
    return typeof payload.errorMessage === "string" ? payload.errorMessage : cause;
  } catch {
    return cause;
  }
}

/** What a Catch adds: Step Functions' `{Error, Cause}` (Cause reduced to the error's message). */
export const CaughtError = z.object({ Error: z.string(), Cause: z.string().transform(causeMessage).optional() });

const FlowDocumentFields = FlowInput.extend({
  /**
   * When the execution started (`$$.Execution.StartTime`; the user pause's Begin gets it through its Parameters and carries it as `begin.executionStartedAt`): a client
   * that connects, or a resume asked for, after this moment wakes the session the flow pauses
   * (issue 25 §1, `wake-waiters.ts`). The other pausing flows use Begin's time.
   */
  started: z.object({ at: z.string() }).optional(),
  begin: BeginResult.optional(),
  provision: ProvisionResult.optional(),
  quiesce: QuiesceResult.optional(),
  snapshot: SnapshotStepResult.optional(),
  terminate: TerminateResult.optional(),
  commit: CommitResult.optional(),
  failure: CaughtError.optional(),
  superseded: CaughtError.optional(),
  /** An idle snapshot found the session not idle after all (the agent answered busy): nothing changed. */
  standDown: CaughtError.optional(),
  recorded: z.object({ ms: z.number() }).optional(),
  discarded: z.object({ terminated: z.string().nullable(), ms: z.number() }).optional(),
  /** What a step carried out through a Catch (step-errors.ts `CarryError`): lifted back into the document. */
  carried: CaughtError.optional(),
});

/**
 * Lifts a carried result (`$.carried`, Step Functions' `{Error, Cause}` whose message is the JSON
 * of document keys) back into the document: Begin's result when it found nothing to do, Commit's
 * when its in-process finish did not complete. Keys the document already has win.
 */
function liftCarried(raw: unknown): unknown {
  if (typeof raw !== "object" || raw === null) return raw;
  const doc = raw as Record<string, unknown>;
  const carried = doc.carried as { Cause?: unknown } | undefined;
  if (typeof carried?.Cause !== "string") return raw;
  try {
    const lifted = JSON.parse(causeMessage(carried.Cause)) as unknown;
    if (typeof lifted !== "object" || lifted === null) return raw;
    return { ...(lifted as Record<string, unknown>), ...doc };
  } catch {
    return raw;
  }
}

/**
 * The user pause's Begin gets its input through Task `Parameters` (issue 15: no Pass state for
 * it): `{document: <the flow document>, executionStartedAt: $$.Execution.StartTime}`. Unwrapped
 * into the document with `started.at`.
 */
function unwrapEnvelope(raw: unknown): unknown {
  if (typeof raw !== "object" || raw === null) return raw;
  const { document, executionStartedAt } = raw as { document?: unknown; executionStartedAt?: unknown };
  if (typeof document !== "object" || document === null || typeof executionStartedAt !== "string") return raw;
  return { ...(document as Record<string, unknown>), started: { at: executionStartedAt } };
}

export const FlowDocument = z.preprocess((raw) => liftCarried(unwrapEnvelope(raw)), FlowDocumentFields);
export type FlowDocument = z.infer<typeof FlowDocument>;
