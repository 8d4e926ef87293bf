/**
 * Which snapshot a resume restores (issue 22 §3): pure, over the snapshot facts stored on the
 * session. A paused session keeps the snapshot its pause took (`snapshotId`) and, when that one
 * expires (a Modal memory snapshot: 7 days after it was taken), a durable filesystem snapshot
 * taken with it (`durableSnapshotId`). Resume restores the first of the two that is still
 * valid `RESTORE_EXPIRY_MARGIN_MS` from now, so the restore itself never races the provider's
 * hard cutoff. The session view shows the choice (`restoreFrom`).
 *
 * Also the one definition of the snapshots a session references, so that deleting superseded
 * snapshots (functions/flows/snapshot-retirement.ts) never touches one a restore would use.
 */
import type { ProviderType, SessionRecord } from "./session";

/**
 * A snapshot counts as expired this long before its recorded expiry: a restore started then still
 * has an hour to finish (a memory restore plus OpenCode's readiness takes minutes at most).
 */
export const RESTORE_EXPIRY_MARGIN_MS = 60 * 60 * 1000;

/** `memory`: processes survive (Modal `mem:` ids, E2B paused sandboxes and snapshots); `filesystem`: the sandbox boots. */
export type RestoreKind = "memory" | "filesystem";

export interface RestoreCandidate {
  kind: RestoreKind;
  snapshotId: string;
  /** ISO time the provider stops restoring it; null: kept until deleted. */
  expiresAt: string | null;
}

export interface RestoreSource extends RestoreCandidate {
  /** Every snapshot the session has is past its expiry (a restore is still tried, on the one that lasts longest). */
  expired: boolean;
  /** What a later resume restores once this one has expired; null when there is nothing after it. */
  fallback: RestoreCandidate | null;
}

export type SnapshotFacts = Pick<SessionRecord, "provider" | "snapshotId" | "snapshotExpiresAt" | "durableSnapshotId" | "durableSnapshotExpiresAt">;

/**
 * The kind of restore a snapshot id gives: `mem:` ids are memory snapshots on every provider
 * (ports/sandbox-provider.ts); E2B's paused sandboxes and snapshot templates both hold memory
 * (E2B docs: a sandbox created from one "starts with the exact filesystem and memory state").
 */
export function restoreKindOf(provider: ProviderType, snapshotId: string): RestoreKind {
  if (snapshotId.startsWith("mem:")) return "memory";
  return provider === "e2b" ? "memory" : "filesystem";
}

function valid(expiresAt: string | null, now: Date): boolean {
  return expiresAt === null || now.getTime() < Date.parse(expiresAt) - RESTORE_EXPIRY_MARGIN_MS;
}

function candidates(s: SnapshotFacts): RestoreCandidate[] {
  const out: RestoreCandidate[] = [];
  if (s.snapshotId) out.push({ kind: restoreKindOf(s.provider, s.snapshotId), snapshotId: s.snapshotId, expiresAt: s.snapshotExpiresAt });
  if (s.durableSnapshotId && s.durableSnapshotId !== s.snapshotId) {
    out.push({ kind: restoreKindOf(s.provider, s.durableSnapshotId), snapshotId: s.durableSnapshotId, expiresAt: s.durableSnapshotExpiresAt });
  }
  return out;
}

/** The snapshot a resume at `now` restores, or null when the session has none (a fresh sandbox). */
export function resolveRestoreSource(s: SnapshotFacts, now: Date): RestoreSource | null {
  const all = candidates(s);
  const index = all.findIndex((c) => valid(c.expiresAt, now));
  if (index >= 0) {
    const chosen = all[index] as RestoreCandidate;
    return { ...chosen, expired: false, fallback: all[index + 1] ?? null };
  }
  // All expired: the one that lasts longest (kept-until-deleted never gets here).
  const last = [...all].sort((a, b) => Date.parse(b.expiresAt ?? "") - Date.parse(a.expiresAt ?? ""))[0];
  return last ? { ...last, expired: true, fallback: null } : null;
}

/** Every snapshot id the session references: none of them may be deleted. */
export function referencedSnapshotIds(s: Pick<SessionRecord, "snapshotId" | "durableSnapshotId">): Set<string> {
  return new Set([s.snapshotId, s.durableSnapshotId].filter((id): id is string => typeof id === "string" && id.length > 0));
}
