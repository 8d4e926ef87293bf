/**
 * Deleting snapshots nobody will restore (issue 22 §4). A flow's Finish retires, after its
 * commit (never before), every snapshot the session referenced when the flow took the lease, or
 * that the flow itself took, that the session no longer references: superseded by a newer
 * snapshot, cleared by a stop (a stopped session never runs again, so it keeps none), cleared by
 * a failed restore, or taken by a flow whose commit never happened. A snapshot the session still
 * references (the one a resume would use, and its durable fallback) is never a candidate, nor is
 * any id that names a sandbox of the session (an E2B paused sandbox's id is its snapshot id: it
 * ends with `terminate`, never here).
 *
 * A delete that fails is recorded in the pending-deletion queue; the orphan sweeper retries it
 * every pass (`retryPendingSnapshotDeletions`) until the provider confirms. Deletes are
 * idempotent at the provider, so a Finish retried by Step Functions deletes nothing twice.
 */
import { referencedSnapshotIds } from "../domain/restore-source";
import type { ProviderType, SessionRecord } from "../domain/session";
import { errorForLog } from "../observability/logger";
import type { SandboxProvider } from "../ports/sandbox-provider";
import type { FlowDeps } from "./flow-deps";
import type { FlowDocument } from "./flow-document";

type RetireDeps = Pick<FlowDeps, "provider" | "snapshotDeletions" | "logger" | "now">;

/** The snapshots a flow leaves unreferenced: pure, over the document and the session as it is after the commit. */
export function supersededSnapshotIds(doc: FlowDocument, session: SessionRecord): string[] {
  const seen = [...(doc.begin?.snapshotIds ?? []), doc.snapshot?.method === "lost" ? null : doc.snapshot?.snapshotId, doc.snapshot?.durableSnapshotId];
  const keep = referencedSnapshotIds(session);
  for (const sandboxId of [session.sandboxId, doc.begin?.sandboxId, doc.provision?.sandboxId]) if (sandboxId) keep.add(sandboxId);
  return [...new Set(seen.filter((id): id is string => typeof id === "string" && id.length > 0 && !keep.has(id)))];
}

/** Deletes one snapshot; a failure is recorded for the sweeper instead of thrown. True when deleted. */
export async function deleteSnapshotOrRecord(
  deps: RetireDeps,
  provider: SandboxProvider,
  entry: { provider: ProviderType; snapshotId: string; sessionId: string | null },
): Promise<boolean> {
  try {
    await provider.deleteSnapshot(entry.snapshotId);
    return true;
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    deps.logger.warn("snapshot delete failed: queued for the sweeper", { ...entry, error: errorForLog(err) });
    await deps.snapshotDeletions.recordFailure({ ...entry, error }, deps.now());
    return false;
  }
}

/** Finish's part: delete what the flow left unreferenced. Returns the ids deleted now. */
export async function retireSupersededSnapshots(deps: RetireDeps, doc: FlowDocument, session: SessionRecord): Promise<string[]> {
  const ids = supersededSnapshotIds(doc, session);
  if (ids.length === 0) return [];
  const provider = await deps.provider(session.provider);
  const deleted: string[] = [];
  for (const snapshotId of ids) {
    if (await deleteSnapshotOrRecord(deps, provider, { provider: session.provider, snapshotId, sessionId: session.id })) deleted.push(snapshotId);
  }
  return deleted;
}

export interface PendingDeletionReport {
  deleted: string[];
  /** No longer deleted: the session references the snapshot again. */
  dropped: string[];
  failed: number;
}

/**
 * The sweeper's pass over the pending deletions: each is retried unless its session references
 * it again (then the entry is dropped, the snapshot kept). A failure counts one more attempt.
 */
export async function retryPendingSnapshotDeletions(deps: RetireDeps & Pick<FlowDeps, "sessions">): Promise<PendingDeletionReport> {
  const report: PendingDeletionReport = { deleted: [], dropped: [], failed: 0 };
  for (const pending of await deps.snapshotDeletions.list()) {
    try {
      const session = pending.sessionId ? await deps.sessions.getSession(pending.sessionId) : null;
      if (session && (referencedSnapshotIds(session).has(pending.snapshotId) || session.sandboxId === pending.snapshotId)) {
        await deps.snapshotDeletions.remove(pending.provider, pending.snapshotId);
        report.dropped.push(pending.snapshotId);
        continue;
      }
      const provider = await deps.provider(pending.provider);
      if (await deleteSnapshotOrRecord(deps, provider, pending)) {
        await deps.snapshotDeletions.remove(pending.provider, pending.snapshotId);
        report.deleted.push(pending.snapshotId);
      } else {
        report.failed++;
      }
    } catch (err) {
      report.failed++;
      deps.logger.error("sweeper: pending snapshot deletion not retried", { snapshotId: pending.snapshotId, error: errorForLog(err) });
    }
  }
  return report;
}
