/**
 * The org's repositories, prebuilds and their builds (API.md "Repositories and prebuilds").
 * One adapter: functions/store/dynamo-repo-catalog.ts (DynamoDB, dynalite locally).
 */
import type { ServiceCommand } from "../domain/agent-settings";
import type { BuildRecord, BuildStatus, BuildTarget, BuiltSnapshot, PrebuildRecord, RepoRecord } from "../domain/repos-prebuilds";

export type RepoChanges = Partial<Pick<RepoRecord, "url" | "defaultBranch" | "credential" | "setupCommands" | "serviceCommands" | "envFiles">>;
export type PrebuildChanges = Partial<Pick<PrebuildRecord, "name" | "repos" | "setupCommands">>;

export interface BuildOutcome {
  status: Exclude<BuildStatus, "running">;
  endedAt: string;
  snapshotId: string | null;
  error: string | null;
  timings: Record<string, number>;
}

export interface RecordSnapshotResult {
  /** False when a newer build's snapshot was recorded first: this one is superseded at once. */
  recorded: boolean;
  /** The snapshot this one replaced (to delete), when recorded. */
  previous: BuiltSnapshot | null;
}

export interface RepoCatalog {
  createRepo(record: RepoRecord): Promise<void>;
  getRepo(orgId: string, repoId: string): Promise<RepoRecord | null>;
  listRepos(orgId: string): Promise<RepoRecord[]>;
  /** Null when the repo does not exist (nothing is created). */
  updateRepo(orgId: string, repoId: string, changes: RepoChanges, now: Date): Promise<RepoRecord | null>;
  /**
   * The agent's `save_service_commands` tool (issue 25 §4): replaces the repo's service commands,
   * which the next build and every session naming the repo by id then use. Null: no such repo.
   */
  updateRepoServiceCommands(orgId: string, repoId: string, commands: ServiceCommand[], now: Date): Promise<RepoRecord | null>;
  /** The deleted record, or null when there was none. */
  deleteRepo(orgId: string, repoId: string): Promise<RepoRecord | null>;

  createPrebuild(record: PrebuildRecord): Promise<void>;
  getPrebuild(orgId: string, prebuildId: string): Promise<PrebuildRecord | null>;
  listPrebuilds(orgId: string): Promise<PrebuildRecord[]>;
  /** Every prebuild of every org (the scheduled rebuild), one page of the index at a time. */
  listAllPrebuilds(): Promise<PrebuildRecord[]>;
  updatePrebuild(orgId: string, prebuildId: string, changes: PrebuildChanges, now: Date): Promise<PrebuildRecord | null>;
  deletePrebuild(orgId: string, prebuildId: string): Promise<PrebuildRecord | null>;

  /** Stores the build `running` and makes it its target's `latestBuild`; false when the target is gone. */
  startBuild(build: BuildRecord): Promise<boolean>;
  getBuild(orgId: string, target: BuildTarget, buildId: string): Promise<BuildRecord | null>;
  /**
   * A build by its id alone (what a build sandbox knows: the sandbox-credential routes and the
   * orphan sweeper), or null when unknown. Strongly consistent.
   */
  findBuild(buildId: string): Promise<BuildRecord | null>;
  /** A target's builds, newest first. */
  listBuilds(orgId: string, target: BuildTarget, limit: number): Promise<BuildRecord[]>;
  /** The build's sandbox, once it exists (so a failure path can terminate it). */
  setBuildSandbox(orgId: string, target: BuildTarget, buildId: string, sandboxId: string): Promise<void>;
  /** Replaces the build's log (already redacted and bounded). */
  setBuildLog(orgId: string, target: BuildTarget, buildId: string, log: string[]): Promise<void>;
  /** Ends the build and, when it is still its target's latest, the target's `latestBuild` too. */
  finishBuild(orgId: string, target: BuildTarget, buildId: string, outcome: BuildOutcome): Promise<void>;
  /** Makes `snapshot` the target's last good snapshot unless a newer build's is already there. */
  recordSnapshot(orgId: string, target: BuildTarget, snapshot: BuiltSnapshot): Promise<RecordSnapshotResult>;
}
