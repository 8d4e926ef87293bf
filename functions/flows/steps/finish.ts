/**
 * Flow step `finish`, on every path out of a flow (committed, skipped, failed, superseded):
 * release the lease (and the relay lease an idle snapshot took), re-arm or cancel the expiry and
 * idle-check schedules, append the audit event with per-step timings, push the final client
 * status, settle an idle snapshot (metrics; retry or circuit breaker after a failure), and
 * deliver prompts that queued up while the flow held the lease (or wake the session for them),
 * and delete the snapshots the flow left unreferenced (issue 22 §4, ../snapshot-retirement.ts).
 * Each part is isolated: one failing does not stop the others, and every part is idempotent, so
 * the ASL may retry the whole step.
 */
import { sessionPreview, type SessionRecord } from "../../domain/session";
import { armIdleCheck } from "../../idle/idle-check";
import { idleModeOf } from "../../idle/idle-predicate";
import { errorForLog } from "../../observability/logger";
import { METRIC_NAMES } from "../../ports/metrics-sink";
import type { ClientConnection, LifecycleOutcome } from "../../ports/session-items";
import { broadcastStatus } from "../../services/broadcast";
import type { FlowDocument, ProvisionResult } from "../flow-document";
import type { StartKind } from "../../observability/metric-registry";
import type { FlowDeps } from "../flow-deps";
import { finalClientStatus } from "../plan";
import { deliverQueuedPrompts } from "../../services/prompt-delivery";
import { flowStep } from "../step";
import { wakeWaiters } from "../wake-waiters";
import { retireSupersededSnapshots } from "../snapshot-retirement";

/** In the order the flows run them. */
const TIMED_STEPS = ["begin", "quiesce", "snapshot", "terminate", "provision", "commit", "recorded", "discarded"] as const;

export function outcomeOf(doc: FlowDocument): LifecycleOutcome {
  if (doc.superseded) return "superseded";
  if (doc.standDown) return "skipped";
  if (doc.failure) return "failed";
  if (doc.commit) return "committed";
  return "skipped";
}

function timingsOf(doc: FlowDocument): Record<string, number> {
  const out: Record<string, number> = {};
  for (const step of TIMED_STEPS) {
    const ms = doc[step]?.ms;
    if (typeof ms === "number") out[step] = ms;
  }
  return out;
}

/**
 * How a sandbox started (TimeToRunning's StartKind): a recovered one, a memory snapshot (a Modal
 * `mem:` snapshot, or an E2B sandbox resumed from its native pause: it starts from the paused
 * sandbox's own id), a filesystem snapshot, or nothing (fresh).
 */
export function startKindOf(provision: Pick<ProvisionResult, "recovered" | "layer" | "startedFrom">, pausedSandboxId?: string | null): StartKind {
  if (provision.recovered) return "recovered";
  if (provision.startedFrom?.startsWith("mem:")) return "memory";
  if (provision.startedFrom && provision.startedFrom === pausedSandboxId) return "memory";
  if (provision.startedFrom && (provision.layer === "session" || provision.layer === "prebuild" || provision.layer === "repo")) return "filesystem";
  return "fresh";
}

async function isolated(deps: FlowDeps, part: string, sessionId: string, run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (err) {
    deps.logger.error("finish part failed", { part, sessionId, error: errorForLog(err) });
  }
}

/**
 * An idle snapshot's aftermath (seed 002 §5b, §12). Committed: the figures operators watch, and
 * prompts that were in flight on a lost sandbox go back to the queue (they run again after the
 * resume their delivery triggers). Failed: the session is still running; the next check comes
 * after IDLE_SNAPSHOT_RETRY_SECONDS, until the failures in a row reach the limit and the circuit
 * breaker stops the session (a safe end state, recorded with its reason, and an alarm metric).
 * Stood down or skipped: look again once the grace allows.
 */
async function settleIdleSnapshot(doc: FlowDocument, deps: FlowDeps, session: SessionRecord, outcome: LifecycleOutcome): Promise<void> {
  const mode = idleModeOf(doc.reason);
  if (outcome === "committed") {
    const begin = doc.begin;
    if (begin?.graceExpiresAt && mode === "inactivity") {
      deps.metrics.put(METRIC_NAMES.idleLag, Math.max(0, Date.parse(begin.startedAt) - Date.parse(begin.graceExpiresAt)), "Milliseconds");
    }
    if (doc.snapshot) deps.metrics.put(METRIC_NAMES.idleSnapshotDuration, doc.snapshot.ms, "Milliseconds", { method: doc.snapshot.method });
    deps.metrics.put(METRIC_NAMES.idleSnapshots, 1, "Count", { mode });
    // Without idle snapshots the sandbox would have run until its expiry (seed 002 "Problem").
    const expiresAt = begin?.sandboxExpiresAt ? Date.parse(begin.sandboxExpiresAt) : NaN;
    if (session.pausedAt && Number.isFinite(expiresAt)) {
      deps.metrics.put(METRIC_NAMES.idleSecondsAvoided, Math.max(0, (expiresAt - Date.parse(session.pausedAt)) / 1000), "Seconds", { Provider: session.provider });
    }
    if (doc.snapshot?.method === "lost") {
      for (const prompt of await deps.prompts.list(doc.sessionId, "processing")) await deps.prompts.move(prompt, "processing", "queued", deps.now());
    }
    return;
  }
  if (session.status !== "running") return;
  if (outcome === "failed") {
    deps.metrics.put(METRIC_NAMES.idleSnapshotFailures, 1, "Count", { mode });
    if (session.idleSnapshotFailures >= deps.config.IDLE_SNAPSHOT_MAX_FAILURES) {
      deps.metrics.put(METRIC_NAMES.circuitBreakerTrips, 1, "Count");
      deps.logger.error("idle snapshot circuit breaker: stopping the session", { sessionId: session.id, failures: session.idleSnapshotFailures });
      const lease = await deps.sessions.readLease(session.id);
      await deps.flows.start({ flow: "stop", sessionId: session.id, generation: lease?.fence ?? 0, actor: "circuit-breaker", reason: "idle_snapshot_failed" });
      return;
    }
  }
  if (outcome === "failed" || doc.standDown) {
    // Retry later. A stand-down (the agent answered busy) is normally re-armed by the agent's idle
    // boundary; this check is the fallback.
    const at = new Date(deps.now().getTime() + deps.config.IDLE_SNAPSHOT_RETRY_SECONDS * 1000);
    await deps.scheduler.arm({ sessionId: session.id, purpose: "idle-check" }, at);
    return;
  }
  await armIdleCheck(deps, session.id, `idle snapshot ${outcome}`);
}

/**
 * The connections Begin listed (flow-document.ts `connections`), when they are still all of them:
 * `committed` (the session as the commit write returned it) shows the `clientConnects` Begin's
 * lease take returned. `$connect` registers a connection before it counts it, so a client that
 * connected after Begin's listing either moved the count before the commit (then Finish lists
 * again) or reads the session after the commit and acts on it itself: it gets the committed status
 * with its `init`, and a paused session it finds it resumes (issue 25 §1, wake-waiters.ts).
 */
function beginsConnections(doc: FlowDocument, committed: SessionRecord | undefined): ClientConnection[] | undefined {
  const carried = doc.begin?.connections;
  const before = doc.begin?.session;
  if (!carried || !before || !committed) return undefined;
  return (committed.clientConnects ?? 0) === (before.clientConnects ?? 0) ? carried : undefined;
}

/**
 * Everything Finish does, also run in process by Commit right after its write (issue 15: the
 * committed path has no Finish state). `known`: the session as the commit write left it, so
 * nothing is read again.
 */
export async function finishFlow(doc: FlowDocument, deps: FlowDeps, known?: SessionRecord): Promise<{ outcome: LifecycleOutcome; status?: string; delivery?: string }> {
  const outcome = outcomeOf(doc);
  if (doc.begin) {
    const lease = doc.begin.lease;
    // A commit write that freed the lease leaves nothing to release (and a second write would cost a failed condition).
    if (!doc.commit?.leaseReleased) await isolated(deps, "release", doc.sessionId, () => deps.sessions.releaseLease(lease));
    const relayLease = doc.begin.relayLease;
    if (relayLease && !doc.commit?.relayLeaseReleased) await isolated(deps, "release relay", doc.sessionId, () => deps.relayLeases.release(relayLease));
  }
  const session = known ?? (await deps.sessions.getSession(doc.sessionId));
  if (!session) return { outcome };

  const provision = doc.provision;
  if (outcome === "committed" && doc.flow === "ensure-runtime" && session.status === "running" && doc.begin && provision) {
    const begin = doc.begin;
    // Time to running (issue 19): the flow's start to its running commit, by provider and start kind.
    await isolated(deps, "metrics", doc.sessionId, async () =>
      deps.metrics.put(METRIC_NAMES.timeToRunning, Math.max(0, deps.now().getTime() - Date.parse(begin.startedAt)), "Milliseconds", {
        Provider: session.provider,
        StartKind: startKindOf(provision, begin.sandboxId),
      }),
    );
  }
  if (outcome === "committed") {
    await isolated(deps, "schedule", doc.sessionId, async () => {
      const expiry = { sessionId: session.id, purpose: "expiry" as const };
      if (session.status === "running" && session.sandboxExpiresAt) {
        const at = Date.parse(session.sandboxExpiresAt) - deps.config.EXPIRY_MIGRATION_LEAD_SECONDS * 1000;
        await deps.scheduler.arm(expiry, new Date(at));
      } else if (session.status !== "running") {
        await deps.scheduler.cancel(expiry);
        // Seed 002 constraint 7: no idle checks for a session without a sandbox.
        await deps.scheduler.cancel({ sessionId: session.id, purpose: "idle-check" });
      }
      // A session that (still) runs may go idle without any client ever connecting.
      if (session.status === "running") await armIdleCheck(deps, session.id, `${doc.flow} committed`, session);
    });
  }
  // After the commit, never before (issue 22 §4); on every outcome, since a failed restore or a
  // flow that never committed can leave snapshots unreferenced too.
  await isolated(deps, "snapshots", doc.sessionId, () => retireSupersededSnapshots(deps, doc, session));
  if (doc.flow === "idle-snapshot") await isolated(deps, "idle", doc.sessionId, () => settleIdleSnapshot(doc, deps, session, outcome));
  if (doc.flow === "migrate" && doc.begin?.proceed && !doc.commit && !doc.superseded && session.status === "running" && session.sandboxId) {
    // Issue 25 §7: the migration did not happen (its old sandbox would not terminate, say), and the
    // schedule that fired it is spent: try again in a fifth of the lead, until the sandbox expires
    // (if it dies first, the relay's stream-failure check pauses the session on its snapshot).
    await isolated(deps, "expiry retry", doc.sessionId, () =>
      deps.scheduler.arm({ sessionId: session.id, purpose: "expiry" }, new Date(deps.now().getTime() + (deps.config.EXPIRY_MIGRATION_LEAD_SECONDS * 1000) / 5)),
    );
  }

  await isolated(deps, "audit", doc.sessionId, () =>
    deps.events.append({
      eventId: doc.execution,
      sessionId: doc.sessionId,
      at: doc.begin?.startedAt ?? deps.now().toISOString(),
      flow: doc.flow,
      outcome,
      from: doc.begin?.fromStatus ?? null,
      to: session.status,
      reason: doc.reason ?? doc.begin?.skipReason ?? null,
      actor: doc.actor,
      execution: doc.execution,
      sandboxId: session.sandboxId,
      previousSandboxId: doc.begin?.sandboxId ?? null,
      message: (doc.superseded?.Cause ?? doc.failure?.Cause ?? doc.standDown?.Cause ?? doc.begin?.skipReason ?? null)?.slice(0, 500) ?? null,
      timings: timingsOf(doc),
      // Which snapshot this execution took: the agent's save_snapshot waits for exactly this one.
      snapshotId: outcome === "committed" && doc.snapshot?.method !== "lost" ? (doc.snapshot?.snapshotId ?? null) : null,
      ...(doc.provision?.layer ? { snapshotLayer: doc.provision.layer, startedFrom: doc.provision.startedFrom ?? null } : {}),
    }),
  );

  // Tell clients where the session ended up when this flow changed it, or when they were shown
  // a progress status that nothing else will replace (record-failure already pushed its error).
  const shownProgress = Boolean(doc.begin?.progressStatus);
  const pushes = outcome === "committed" || (outcome === "failed" && !doc.recorded && shownProgress);
  // One listing of the connections, after the commit, for the push and the wake below (issue 15);
  // none when Begin's still holds every connection.
  let connections: ClientConnection[] | undefined = pushes ? beginsConnections(doc, known) : undefined;
  if (pushes && !connections) await isolated(deps, "connections", doc.sessionId, async () => (connections = await deps.connections.list(doc.sessionId)));
  if (pushes) {
    await isolated(deps, "push", doc.sessionId, () => broadcastStatus(deps, doc.sessionId, finalClientStatus(session.status), session.errorMessage ?? undefined, { connections, preview: sessionPreview(session) }));
  }

  // Issue 25 §1: clients that connected, or a resume asked for, while this flow paused the session.
  if (outcome === "committed") await isolated(deps, "wake", doc.sessionId, () => wakeWaiters(deps, doc, session, connections));
  // The relay holding the session revalidates it (drops a paused one, reopens on a new sandbox);
  // a session now running is claimed at once, before the delivery below looks for a watcher.
  const nudge = deps.relayNudge;
  if (outcome === "committed" && nudge) await isolated(deps, "relay", doc.sessionId, () => nudge.nudge(doc.sessionId));

  let delivery = "none";
  // A stopped session never runs again: its queued prompts stay held (deliverQueuedPrompts would
  // only say so), so a stop does not query them (issue 15: one request per lifecycle less).
  if (session.status === "stopped") return { outcome, status: session.status, delivery };
  // A session that never had a prompt has no queue to look at (issue 15). The prompt route counts
  // a prompt after storing it and then delivers on the session its count write returned: a prompt
  // counted before this session was written (the commit, or the read after the release) is seen
  // here; one counted after it finds the lease released and delivers or wakes by itself.
  if (session.promptsEnqueued === 0) return { outcome, status: session.status, delivery };
  await isolated(deps, "prompts", doc.sessionId, async () => {
    delivery = (await deliverQueuedPrompts(deps, doc.sessionId, { actor: `flow:${doc.execution}`, wakeFromError: false })).outcome;
  });
  return { outcome, status: session.status, delivery };
}

export const makeFinishStep = flowStep("finish", (doc, deps) => finishFlow(doc, deps));
