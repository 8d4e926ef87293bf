/**
 * Which snapshot layer a sandbox starts from (seed 000 "Snapshot Layering Architecture",
 * "Resolution Order"; seed 003 §6.5). Pure: the caller loads the session, prebuild, repo
 * snapshot and base snapshot id and passes them in.
 */
import type { ProviderType, RepoSpec } from "./session";

export type SnapshotLayer = "session" | "prebuild" | "repo" | "base" | "none";

export interface SnapshotResolutionInput {
  provider: ProviderType | null;
  repos: readonly RepoSpec[];
  /** The session's own snapshot (pause, idle snapshot, manual save); may be a `mem:` id. */
  sessionSnapshotId?: string | null;
  prebuild?: { snapshotId: string | null; status: string } | null;
  /** Snapshot of the single repo's clone (built by the repo snapshot worker). */
  repoSnapshot?: { snapshotId: string | null; status: string; provider: ProviderType | null } | null;
  /** Base layer (OpenCode + services, no repo), e.g. `MODAL_BASE_SNAPSHOT_ID`. */
  baseSnapshotId?: string | null;
}

export interface SnapshotResolution {
  layer: SnapshotLayer;
  /** Restore from this (session, prebuild or repo layer): `CreateSandboxOpts.snapshotId`. */
  snapshotId: string | null;
  /** Start from this base layer and clone fresh: `CreateSandboxOpts.baseSnapshotId`. */
  baseSnapshotId: string | null;
  snapshotHasDeps: boolean;
}

function present(id: string | null | undefined): id is string {
  return typeof id === "string" && id.length > 0;
}

/**
 * Repo snapshots are only used on Modal, for a single repo cloned at the workspace root, when the
 * snapshot is ready and was built for Modal (seed 003 §6.5: E2B and multi-repo skip this layer).
 */
function repoLayerApplies(input: SnapshotResolutionInput): boolean {
  const snap = input.repoSnapshot;
  const [only, ...rest] = input.repos;
  return (
    input.provider === "modal" &&
    only !== undefined &&
    rest.length === 0 &&
    (only.workspacePath ?? ".") === "." &&
    snap !== null &&
    snap !== undefined &&
    snap.status === "ready" &&
    present(snap.snapshotId) &&
    (snap.provider === "modal" || snap.provider === null)
  );
}

/** session > prebuild (ready) > repo (Modal only) > base > none. */
export function resolveSnapshot(input: SnapshotResolutionInput): SnapshotResolution {
  if (present(input.sessionSnapshotId)) return restoreFrom("session", input.sessionSnapshotId);
  if (input.prebuild && input.prebuild.status === "ready" && present(input.prebuild.snapshotId)) {
    return restoreFrom("prebuild", input.prebuild.snapshotId);
  }
  if (repoLayerApplies(input) && input.repoSnapshot && present(input.repoSnapshot.snapshotId)) {
    return restoreFrom("repo", input.repoSnapshot.snapshotId);
  }
  if (present(input.baseSnapshotId)) {
    return { layer: "base", snapshotId: null, baseSnapshotId: input.baseSnapshotId, snapshotHasDeps: false };
  }
  return { layer: "none", snapshotId: null, baseSnapshotId: null, snapshotHasDeps: false };
}

function restoreFrom(layer: "session" | "prebuild" | "repo", snapshotId: string): SnapshotResolution {
  return { layer, snapshotId, baseSnapshotId: null, snapshotHasDeps: snapshotHasDeps(layer) };
}

/** Session and prebuild snapshots carry installed dependencies; repo/base/none do not (seed 000). */
export function snapshotHasDeps(layer: SnapshotLayer): boolean {
  return layer === "session" || layer === "prebuild";
}
