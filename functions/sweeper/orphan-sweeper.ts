/**
 * The orphan sweeper (seed 002 §11, ARCHITECTURE.md §4 "the sweeper converges"): the backstop
 * behind the event-driven idle checks, run every SWEEPER_INTERVAL_SECONDS (an EventBridge
 * Scheduler rate schedule in AWS, a timer locally). It only ever starts the same
 * `idle-snapshot` flow (same lease, same re-check, same CAS), or terminates sandboxes that no
 * session references, so it can never conflict with a live relay or a running flow.
 *
 * Pass 1, every running session (skipping those a flow holds right now):
 * - its sandbox is gone at the provider -> `idle-snapshot` with reason `sandbox_lost` (pause on
 *   the last snapshot; prompts in flight go back to the queue);
 * - no live relay lease and past its grace with nobody connected -> `orphaned`;
 * - idle by the full predicate (an idle check that was lost) -> `inactivity`;
 * - only the grace in the way -> the idle check is re-armed for when it runs out.
 * Pass 2, every sandbox the providers list as ours:
 * - referenced by no session (and older than ORPHAN_SANDBOX_MIN_AGE_SECONDS, with no flow holding
 *   its session, since a flow may be about to commit it) -> terminated;
 * - still referenced by a paused or stopped session whose terminate failed (seed 002 §5b step 8:
 *   "keep sandboxId for sweeper retry") -> terminated, and the reference cleared under the lease;
 * - a build's sandbox (its owner id is a build id, functions/builds/build-sandbox.ts): left alone
 *   while the build runs and the sandbox is the build's (or the build has recorded none yet);
 *   terminated once the build ended, ran past BUILD_MAX_RUNNING_SECONDS, or is unknown, or when it
 *   is a leftover of an earlier provision attempt (`build_ended`).
 * Pass 3, every pending snapshot deletion (a delete that failed, issue 22 §4): retried, unless its
 * session references the snapshot again (flows/snapshot-retirement.ts).
 */
import type { SessionRecord, ProviderType } from "../domain/session";
import type { FlowDeps } from "../flows/flow-deps";
import { readIdleFacts } from "../idle/idle-check";
import { evaluateIdle, type IdleMode } from "../idle/idle-predicate";
import { errorForLog } from "../observability/logger";
import { METRIC_NAMES } from "../ports/metrics-sink";
import type { ListedSandbox, SandboxProvider } from "../ports/sandbox-provider";
import { retryPendingSnapshotDeletions } from "../flows/snapshot-retirement";
import { buildStillRunning, isBuildId } from "../builds/build-sandbox";
import { allRunningSessions } from "../services/running-sessions";

export interface SweepReport {
  runningScanned: number;
  started: { sessionId: string; mode: IdleMode; execution: string }[];
  rearmed: number;
  sandboxesListed: number;
  terminated: { sandboxId: string; sessionId: string | null; why: "unreferenced" | "leftover" | "build_ended" }[];
  /** Pending snapshot deletions that succeeded on this pass. */
  snapshotsDeleted: string[];
  errors: number;
}


const runningSessions = (deps: FlowDeps): Promise<SessionRecord[]> => allRunningSessions(deps.sessions);

function leaseHeld(lease: { owner: string | null; expiresAt: number | null } | null, now: Date): boolean {
  return Boolean(lease?.owner) && (lease?.expiresAt ?? 0) > now.getTime();
}

/** Live sandbox ids per provider, asked in one batch per provider. */
async function aliveByProvider(deps: FlowDeps, sessions: SessionRecord[]): Promise<Map<ProviderType, Set<string> | null>> {
  const byProvider = new Map<ProviderType, string[]>();
  for (const s of sessions) if (s.sandboxId) byProvider.set(s.provider, [...(byProvider.get(s.provider) ?? []), s.sandboxId]);
  const out = new Map<ProviderType, Set<string> | null>();
  for (const [type, ids] of byProvider) {
    try {
      const provider = await deps.provider(type);
      out.set(type, new Set(await provider.checkSandboxes(ids)));
    } catch (err) {
      // Unknown liveness is not death: nothing is declared lost on a provider outage.
      deps.logger.warn("sweeper: liveness check failed", { provider: type, error: errorForLog(err) });
      out.set(type, null);
    }
  }
  return out;
}

async function startIdleSnapshot(deps: FlowDeps, report: SweepReport, sessionId: string, mode: IdleMode): Promise<void> {
  const lease = await deps.sessions.readLease(sessionId);
  const { executionName } = await deps.flows.start({ flow: "idle-snapshot", sessionId, generation: lease?.fence ?? 0, actor: "sweeper", reason: mode });
  report.started.push({ sessionId, mode, execution: executionName });
}

async function sweepRunning(deps: FlowDeps, report: SweepReport): Promise<void> {
  const sessions = await runningSessions(deps);
  report.runningScanned = sessions.length;
  const alive = await aliveByProvider(deps, sessions);
  for (const listed of sessions) {
    try {
      const now = deps.now();
      if (leaseHeld(await deps.sessions.readLease(listed.id), now)) continue;
      const facts = await readIdleFacts(deps, listed.id);
      const sandboxId = facts?.session.status === "running" ? facts.session.sandboxId : null;
      if (!facts || !sandboxId) continue;
      const live = alive.get(listed.provider);
      if (live && !live.has(sandboxId)) {
        await startIdleSnapshot(deps, report, listed.id, "sandbox_lost");
        continue;
      }
      if (!facts.relayWatching && evaluateIdle(facts, "orphaned", deps.config).idle) {
        deps.metrics.put(METRIC_NAMES.orphansFound, 1, "Count");
        await startIdleSnapshot(deps, report, listed.id, "orphaned");
        continue;
      }
      const verdict = evaluateIdle(facts, "inactivity", deps.config);
      if (verdict.idle) {
        await startIdleSnapshot(deps, report, listed.id, "inactivity");
      } else if (verdict.recheckAt) {
        await deps.scheduler.arm({ sessionId: listed.id, purpose: "idle-check" }, verdict.recheckAt);
        report.rearmed++;
      }
    } catch (err) {
      report.errors++;
      deps.logger.error("sweeper: session not swept", { sessionId: listed.id, error: errorForLog(err) });
    }
  }
}

async function terminateListed(deps: FlowDeps, provider: SandboxProvider, listed: ListedSandbox, report: SweepReport): Promise<void> {
  const now = deps.now();
  if (listed.startedAt !== null && now.getTime() - listed.startedAt < deps.config.ORPHAN_SANDBOX_MIN_AGE_SECONDS * 1000) return;
  if (!listed.sessionId) return; // Not attributable to a session: never ours to judge.
  if (isBuildId(listed.sessionId)) return terminateBuildSandbox(deps, provider, { ...listed, sessionId: listed.sessionId }, report);
  // The session and its lease from one read: a flow's commit sets the sandbox and frees the lease
  // in one write, so two reads could see the sandbox unreferenced (before the commit) and the
  // lease free (after it), and terminate the sandbox the flow just committed.
  const found = await deps.sessions.getSessionWithLease(listed.sessionId);
  const session = found?.session ?? null;
  if (session && session.sandboxId === listed.sandboxId) {
    // Referenced: only a leftover that a pause or stop failed to terminate is swept.
    const leftover = session.status === "stopped" || (session.status === "paused" && !provider.supportsPause);
    if (!leftover) return;
    const lease = await deps.sessions.acquireLease(session.id, `sweeper:${listed.sandboxId}`, now, deps.config.LEASE_TTL_SECONDS).catch(() => null);
    if (!lease) return; // A flow holds the session: it decides, the next sweep looks again.
    try {
      const fresh = await deps.sessions.getSession(session.id);
      if (!fresh || fresh.sandboxId !== listed.sandboxId || fresh.status !== session.status) return;
      await provider.terminate(session.id, listed.sandboxId);
      await deps.sessions.update(fresh, { sandboxId: null, openCodeUrl: null, sandboxExpiresAt: null }, deps.now(), lease);
      report.terminated.push({ sandboxId: listed.sandboxId, sessionId: session.id, why: "leftover" });
    } finally {
      await deps.sessions.releaseLease(lease);
    }
    return;
  }
  // Unreferenced. A flow holding the session may be about to commit this very sandbox.
  if (found && leaseHeld(found.lease, now)) return;
  await provider.terminate(listed.sessionId, listed.sandboxId);
  deps.metrics.put(METRIC_NAMES.orphanSandboxesTerminated, 1, "Count");
  report.terminated.push({ sandboxId: listed.sandboxId, sessionId: listed.sessionId, why: "unreferenced" });
}

/** A build's sandbox: kept while its build runs, else terminated (the build's terminate failed or never ran). */
async function terminateBuildSandbox(deps: FlowDeps, provider: SandboxProvider, listed: ListedSandbox & { sessionId: string }, report: SweepReport): Promise<void> {
  const build = await deps.catalog.findBuild(listed.sessionId);
  if (build && buildStillRunning(build, deps.now()) && (build.sandboxId === null || build.sandboxId === listed.sandboxId)) return;
  await provider.terminate(listed.sessionId, listed.sandboxId);
  deps.metrics.put(METRIC_NAMES.orphanSandboxesTerminated, 1, "Count");
  report.terminated.push({ sandboxId: listed.sandboxId, sessionId: listed.sessionId, why: "build_ended" });
}

async function sweepSandboxes(deps: FlowDeps, report: SweepReport): Promise<void> {
  for (const type of deps.config.SANDBOX_PROVIDERS) {
    let provider: SandboxProvider;
    let listed: ListedSandbox[];
    try {
      provider = await deps.provider(type);
      listed = await provider.listSandboxes();
    } catch (err) {
      report.errors++;
      deps.logger.error("sweeper: sandboxes not listed", { provider: type, error: errorForLog(err) });
      continue;
    }
    report.sandboxesListed += listed.length;
    for (const sandbox of listed) {
      try {
        await terminateListed(deps, provider, sandbox, report);
      } catch (err) {
        report.errors++;
        deps.logger.error("sweeper: sandbox not swept", { sandboxId: sandbox.sandboxId, error: errorForLog(err) });
      }
    }
  }
}

export async function sweep(deps: FlowDeps): Promise<SweepReport> {
  const report: SweepReport = { runningScanned: 0, started: [], rearmed: 0, sandboxesListed: 0, terminated: [], snapshotsDeleted: [], errors: 0 };
  await sweepRunning(deps, report);
  await sweepSandboxes(deps, report);
  try {
    const pending = await retryPendingSnapshotDeletions(deps);
    report.snapshotsDeleted = pending.deleted;
    report.errors += pending.failed;
  } catch (err) {
    report.errors++;
    deps.logger.error("sweeper: pending snapshot deletions not read", { error: errorForLog(err) });
  }
  deps.logger.info("sweep done", {
    runningScanned: report.runningScanned,
    started: report.started.length,
    rearmed: report.rearmed,
    sandboxesListed: report.sandboxesListed,
    terminated: report.terminated.length,
    snapshotsDeleted: report.snapshotsDeleted.length,
    errors: report.errors,
  });
  return report;
}
