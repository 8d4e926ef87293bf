/**
 * Pure lifecycle decisions, one place for each (tested without I/O): whether a flow has work
 * to do for the state it finds after taking the lease, which client status it shows meanwhile,
 * which snapshot method it uses, and what its commit writes.
 */
import type { ClientStatus, ClientType, SessionRecord } from "../domain/session";
import type { TransitionChanges } from "../domain/session-transitions";
import { idleModeOf, type IdleVerdict } from "../idle/idle-predicate";
import type { FlowName } from "../ports/flow-runner";
import type { SandboxProvider } from "../ports/sandbox-provider";

export type MigrateBranch = "migrate" | "pause";

export interface FlowPlan {
  proceed: boolean;
  /** Why there is nothing to do (recorded in the audit trail). */
  skipReason: string | null;
  /** What clients see while the flow runs; null when it shows nothing new. */
  progressStatus: ClientStatus | null;
  branch: MigrateBranch | null;
}

const skip = (skipReason: string): FlowPlan => ({ proceed: false, skipReason, progressStatus: null, branch: null });
const go = (progressStatus: ClientStatus | null, branch: MigrateBranch | null = null): FlowPlan => ({
  proceed: true,
  skipReason: null,
  progressStatus,
  branch,
});

/** Client types that keep their sandbox across an expiry without a connected client (seed 000 §6). */
const HEADLESS_CLIENT_TYPES: readonly ClientType[] = ["automation"];

/**
 * Decides from the state read after taking the lease (seed 002 constraint 14: re-read after the
 * lock). A second request for work already done finds nothing to do and skips.
 */
export function planFlow(flow: FlowName, session: SessionRecord, ctx: { connectedClients: number; idle?: IdleVerdict | null }): FlowPlan {
  switch (flow) {
    case "ensure-runtime":
      if (session.status === "starting") return go("creating");
      if (session.status === "paused" || session.status === "error") return go("resuming");
      return skip(`session is ${session.status}`);
    case "idle-snapshot":
      if (session.status !== "running") return skip(`session is ${session.status}`);
      if (!session.sandboxId) return skip("session has no sandbox");
      // The full predicate, grace included, under the lease (seed 002 constraints 2, 13, 14).
      if (!ctx.idle) return skip("idle predicate not evaluated");
      if (!ctx.idle.idle) return skip(`not idle: ${ctx.idle.reason ?? "unknown"}`);
      return go(null);
    case "pause":
    case "snapshot":
      if (session.status !== "running") return skip(`session is ${session.status}`);
      if (!session.sandboxId) return skip("session has no sandbox");
      return go(null);
    case "stop":
      if (session.status === "stopped") return skip("session is already stopped");
      return go(null);
    case "migrate": {
      if (session.status !== "running") return skip(`session is ${session.status}`);
      if (!session.sandboxId) return skip("session has no sandbox");
      const keepRunning = ctx.connectedClients > 0 || HEADLESS_CLIENT_TYPES.includes(session.clientType);
      return keepRunning ? go("migrating", "migrate") : go(null, "pause");
    }
  }
}

export type SnapshotMethod = "pause" | "memory" | "filesystem";

/** What the snapshot step did: a method, or `lost` (the sandbox was already gone: nothing to snapshot). */
export type SnapshotOutcome = SnapshotMethod | "lost";

/**
 * Pausing prefers the provider's native pause (E2B), then a memory snapshot (Modal, seed 002
 * §1), then a filesystem snapshot. A snapshot that must leave the sandbox running, or that seeds
 * a replacement sandbox (migration), is a filesystem snapshot (seed 000 §6, §7).
 */
export function snapshotMethod(
  flow: FlowName,
  branch: MigrateBranch | null,
  provider: Pick<SandboxProvider, "supportsPause" | "supportsMemorySnapshot">,
): SnapshotMethod {
  const pausing = flow === "pause" || flow === "idle-snapshot" || (flow === "migrate" && branch === "pause");
  if (!pausing) return "filesystem";
  if (provider.supportsPause) return "pause";
  if (provider.supportsMemorySnapshot) return "memory";
  return "filesystem";
}

/** Whether the flow terminates the sandbox it found (pause-capable providers keep it, seed 002 §5b). */
export function terminatesSandbox(flow: FlowName, branch: MigrateBranch | null, method: SnapshotOutcome | null): boolean {
  if (flow === "stop") return true;
  if (method === "lost") return false;
  if (flow === "snapshot") return false;
  if (flow === "migrate" && branch === "migrate") return true;
  return method !== "pause";
}

export function pauseReasonFor(flow: FlowName, reason: string | null | undefined, method?: SnapshotOutcome): string {
  // Whatever was asked for, a sandbox found gone pauses on an older snapshot: say so (issue 25 §7).
  if (method === "lost") return "sandbox_lost";
  if (flow === "pause") return reason ?? "user";
  // Idle snapshots carry their mode: inactivity, orphaned (sweeper), sandbox_lost (sweeper).
  if (flow === "idle-snapshot") return idleModeOf(reason);
  return "inactivity";
}

/** The client status for a flow's end state. */
export function finalClientStatus(status: SessionRecord["status"]): ClientStatus {
  return status === "starting" ? "creating" : status;
}

export type CommitKind = "running" | "paused" | "stopped" | "snapshot" | "swap";

export function commitKind(flow: FlowName, branch: MigrateBranch | null): CommitKind {
  switch (flow) {
    case "ensure-runtime":
      return "running";
    case "pause":
    case "idle-snapshot":
      return "paused";
    case "stop":
      return "stopped";
    case "snapshot":
      return "snapshot";
    case "migrate":
      return branch === "migrate" ? "swap" : "paused";
  }
}

/**
 * The pause commit's fields (seed 002 §5b step 8): the sandbox id is kept for pause-capable
 * providers and when terminate failed (so the sweeper retries it). The coding-agent session id
 * is kept: every snapshot method preserves OpenCode's storage, and resume verifies it anyway.
 */
export function pausedChanges(input: {
  snapshotId: string | null;
  sandboxId: string | null;
  method: SnapshotOutcome;
  terminated: boolean;
  pauseReason: string;
  now: Date;
}): TransitionChanges {
  // A paused session no longer has a live agent: its idle state is history (seed 002 §5b step 11).
  const agent = { agentBusy: false, lastKnownAgentIdleAt: null, idleSnapshotFailures: 0 };
  if (input.method === "lost") {
    // Nothing to snapshot: resume from the last snapshot there is, and say so (ARCHITECTURE.md §4).
    const message = input.snapshotId
      ? `The sandbox was lost; resume restores the last snapshot (taken before ${input.now.toISOString()})`
      : "The sandbox was lost and there is no snapshot; resume starts a fresh sandbox";
    return { ...agent, snapshotId: input.snapshotId, pauseReason: input.pauseReason, sandboxId: null, openCodeUrl: null, sandboxExpiresAt: null, errorMessage: message };
  }
  const keepSandbox = input.method === "pause" || !input.terminated;
  return keepSandbox
    ? { ...agent, snapshotId: input.snapshotId, pauseReason: input.pauseReason, sandboxId: input.sandboxId }
    : { ...agent, snapshotId: input.snapshotId, pauseReason: input.pauseReason, sandboxId: null, sandboxExpiresAt: null };
}
