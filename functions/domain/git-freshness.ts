/**
 * Git freshness on restore (seed 003 §2 "Git Freshness", §6.7). Pure: the caller passes `now`
 * (epoch ms) and the metadata it read from the sandbox.
 */

/** `SANDBOX_GIT_PULL_ON_RESTORE` and `SANDBOX_GIT_PULL_CADENCE_SECONDS` (0 = pull on every restore). */
export interface GitFreshnessConfig {
  enabled: boolean;
  cadenceSeconds: number;
}

/** `/home/user/.proliferate/metadata.json` inside the sandbox (seed 003 §4). */
export interface SessionMetadata {
  sessionId: string;
  repoDir: string;
  createdAt: number;
  /** Epoch ms of the last restore on which every repo pull succeeded; the cadence clock. */
  lastGitFetchAt?: number;
}

export interface ShouldPullInput extends GitFreshnessConfig {
  /** The sandbox was restored from a snapshot (a fresh clone is already up to date). */
  hasSnapshot: boolean;
  repoCount: number;
  lastGitFetchAt?: number | null;
  now: number;
}

/**
 * `false` when disabled, not restoring, or no repos; otherwise `true` when the cadence is 0,
 * there is no `lastGitFetchAt` (legacy snapshot), or at least `cadenceSeconds` have elapsed.
 */
export function shouldPullOnRestore(input: ShouldPullInput): boolean {
  if (!input.enabled || !input.hasSnapshot || input.repoCount <= 0) return false;
  if (input.cadenceSeconds <= 0) return true;
  if (input.lastGitFetchAt === null || input.lastGitFetchAt === undefined) return true;
  return input.now - input.lastGitFetchAt >= input.cadenceSeconds * 1_000;
}

/**
 * The metadata to write back after the pulls. The cadence advances only when every repo pull
 * succeeded (seed 003 §2: a single failure leaves the timer so the next restore retries).
 * Returns the same object when nothing changes, so callers can skip the write.
 */
export function metadataAfterPull(metadata: SessionMetadata, pullSucceeded: readonly boolean[], now: number): SessionMetadata {
  if (pullSucceeded.length === 0 || !pullSucceeded.every(Boolean)) return metadata;
  return { ...metadata, lastGitFetchAt: now };
}
