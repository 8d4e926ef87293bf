/**
 * Pending snapshot deletions (issue 22 §4): a snapshot that a flow (or anything else) failed to
 * delete is recorded here, and the orphan sweeper retries it every pass until the provider
 * confirms (functions/flows/snapshot-retirement.ts). Recording the same snapshot again only
 * counts another attempt.
 */
import type { ProviderType } from "../domain/session";

export interface PendingSnapshotDeletion {
  provider: ProviderType;
  snapshotId: string;
  /** The session the snapshot belonged to (the sweeper re-checks it still does not reference it); null: none. */
  sessionId: string | null;
  /** When the first failed attempt was recorded. */
  recordedAt: string;
  lastAttemptAt: string;
  attempts: number;
  /** The last failure's message (already redacted by the provider). */
  lastError: string | null;
}

export interface SnapshotDeletionQueue {
  /** Records a failed attempt (creates the entry, or counts one more attempt on it). */
  recordFailure(entry: { provider: ProviderType; snapshotId: string; sessionId: string | null; error: string }, now: Date): Promise<void>;
  /** Every pending deletion, all pages, oldest first by key. */
  list(): Promise<PendingSnapshotDeletion[]>;
  /** Idempotent. */
  remove(provider: ProviderType, snapshotId: string): Promise<void>;
}
