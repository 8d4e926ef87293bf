/**
 * The allowed-transition table for stored session statuses: data in one place (ARCHITECTURE.md §4).
 * The store turns it into condition expressions, so an illegal transition is rejected by
 * DynamoDB itself, not only by this code.
 *
 *   starting ──► running ──► paused ──► running ...
 *      │           │  │        │
 *      │           │  └► error ◄┘   (error ──► running: the next resume retries)
 *      └───────────┴────────┴──► stopped (terminal)
 *
 * A sandbox swap that keeps the session `running` (expiry migration) is not a status change:
 * it is a compare-and-set on `sandboxId` + fence, outside this table.
 */
import type { ClientStatus, SessionRecord, SessionStatus } from "./session";
import { SESSION_STATUSES } from "./session";
import { InvalidTransitionError } from "./errors";

export const SESSION_TRANSITIONS: Readonly<Record<SessionStatus, readonly SessionStatus[]>> = {
  // Provisioning succeeded, failed, or the user deleted the session before it ever ran.
  starting: ["running", "error", "stopped"],
  // Pause (user, inactivity, expiry with no clients), stop, or an unrecoverable fault.
  running: ["paused", "stopped", "error"],
  // Resume; stop; a failed restore (seed 002 §5c: restartable, surfaced to the user).
  paused: ["running", "stopped", "error"],
  // The next resume retries from scratch or from the snapshot; or the user gives up.
  error: ["running", "stopped"],
  // Terminal: a stopped session never runs again.
  stopped: [],
};

export function canTransition(from: SessionStatus, to: SessionStatus): boolean {
  return SESSION_TRANSITIONS[from].includes(to);
}

/** Statuses from which `to` may be entered: the store's condition expression is built from this. */
export function allowedSources(to: SessionStatus): SessionStatus[] {
  return SESSION_STATUSES.filter((from) => canTransition(from, to));
}

export function assertTransition(from: SessionStatus, to: SessionStatus): void {
  if (!canTransition(from, to)) throw new InvalidTransitionError(from, to);
}

export function isTerminal(status: SessionStatus): boolean {
  return SESSION_TRANSITIONS[status].length === 0;
}

/** Every status a session can still leave (the metering pass's SessionsByStatus gauge counts these). */
export const NON_TERMINAL_STATUSES: readonly SessionStatus[] = SESSION_STATUSES.filter((s) => !isTerminal(s));

/**
 * The client-facing status for a stored status when no flow is in progress. Flows in progress
 * push their own (`resuming`, `migrating`) while they run.
 */
export function clientStatusOf(status: SessionStatus): ClientStatus {
  switch (status) {
    case "starting":
      return "creating";
    case "running":
    case "paused":
    case "stopped":
    case "error":
      return status;
  }
}

/** Fields a lifecycle write may change besides the status itself. `lastActivityAt` is not
 * among them: only `touchActivity` moves it (seed 002 constraint 4). */
export const TRANSITION_CHANGE_FIELDS = [
  "sandboxId",
  "snapshotId",
  "snapshotExpiresAt",
  "durableSnapshotId",
  "durableSnapshotExpiresAt",
  "pauseReason",
  "stopReason",
  "errorMessage",
  "pausedAt",
  "endedAt",
  "sandboxExpiresAt",
  "openCodeUrl",
  "previewUrl",
  "codingAgentSessionId",
  "sandboxKeyEpoch",
  "agentBusy",
  "lastKnownAgentIdleAt",
  "idleSnapshotFailures",
  "snapshotLayer",
] as const satisfies readonly (keyof SessionRecord)[];

export type TransitionChanges = Partial<Pick<SessionRecord, (typeof TRANSITION_CHANGE_FIELDS)[number]>>;

/**
 * Only the change fields, whatever object the caller passed: TypeScript lets a wider object
 * through when it is not a literal, and a stray `status` or `version` must never reach a write.
 */
export function pickTransitionChanges(changes: TransitionChanges): TransitionChanges {
  const out: Record<string, unknown> = {};
  for (const field of TRANSITION_CHANGE_FIELDS) if (Object.hasOwn(changes, field)) out[field] = changes[field];
  return out as TransitionChanges;
}

/**
 * The record after moving `current` to `to` at `now` (pure). Accounting: active seconds are added
 * on every transition out of `running`; entering `running` starts a new period. Entering
 * `stopped` stamps `endedAt`; entering `paused` stamps `pausedAt`.
 */
export function applyTransition(
  current: SessionRecord,
  to: SessionStatus,
  now: Date,
  wider: TransitionChanges = {},
): SessionRecord {
  assertTransition(current.status, to);
  const changes = pickTransitionChanges(wider);
  const at = now.toISOString();
  let activeSeconds = current.activeSeconds;
  let runningSince = current.runningSince;
  if (current.status === "running" && runningSince) {
    activeSeconds += Math.max(0, (now.getTime() - Date.parse(runningSince)) / 1000);
    runningSince = null;
  }
  if (to === "running") runningSince = at;
  return {
    ...current,
    ...(to === "paused" ? { pausedAt: at } : {}),
    ...(to === "stopped" ? { endedAt: at } : {}),
    ...(to === "running" ? { pauseReason: null, pausedAt: null, errorMessage: null } : {}),
    ...changes,
    status: to,
    updatedAt: at,
    activeSeconds: Math.round(activeSeconds * 1000) / 1000,
    runningSince,
    version: current.version + 1,
  };
}
