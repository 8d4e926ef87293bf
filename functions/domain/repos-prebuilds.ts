/**
 * Repositories and prebuilds (API.md v1.1 "Repositories and prebuilds", seed 003 "Snapshot
 * Layering"): an org's repositories with their clone settings, and named sets of them whose
 * built snapshot new sessions start from. The builder (statemachines/builds/) fills in each
 * target's `snapshot`; a build in progress never replaces it, so sessions keep using the last
 * good one until a newer build succeeds.
 */
import * as z from "zod";
import { SecretName, ServiceCommand } from "./agent-settings";
import { EnvFileSchema } from "../../sandbox/shared/env-file-schema";
import { ProviderType } from "./session";

export const RepoId = z.string().regex(/^repo_[0-9a-z]{26}$/, "must be a repository id (repo_ followed by 26 characters)");
export const PrebuildId = z.string().regex(/^pb_[0-9a-z]{26}$/, "must be a prebuild id (pb_ followed by 26 characters)");
export const BuildId = z.string().regex(/^bld_[0-9a-z]{26}$/, "must be a build id (bld_ followed by 26 characters)");

export const BUILD_STATUSES = ["running", "succeeded", "failed"] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

export const BUILD_TRIGGERS = ["manual", "schedule", "push"] as const;
export type BuildTrigger = (typeof BUILD_TRIGGERS)[number];

/** What a build builds: a prebuild (its repos at their workspace paths) or one repo at the workspace root. */
export const BuildTarget = z.object({ kind: z.enum(["prebuild", "repo"]), id: z.string().min(1) }).strict();
export type BuildTarget = z.infer<typeof BuildTarget>;

/** The last good snapshot of a prebuild or repo. `startedAt`: its build's start (newer builds win). */
export const BuiltSnapshot = z.object({
  id: z.string().min(1),
  builtAt: z.iso.datetime(),
  buildId: z.string().min(1),
  startedAt: z.iso.datetime(),
  provider: ProviderType,
  /**
   * When the provider stops restoring it (a Modal filesystem image taken with
   * MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS); absent or null: kept until deleted.
   */
  expiresAt: z.iso.datetime().nullable().optional(),
});
export type BuiltSnapshot = z.infer<typeof BuiltSnapshot>;

/** Whether a built snapshot can still be restored at `now` (an expired one is never offered to a session). Pure. */
export function builtSnapshotUsable(snapshot: Pick<BuiltSnapshot, "expiresAt">, now: Date): boolean {
  return !snapshot.expiresAt || Date.parse(snapshot.expiresAt) > now.getTime();
}

/** The latest build's summary on its target (`latestBuild` in the API). */
export const BuildSummary = z.object({
  id: z.string(),
  status: z.enum(BUILD_STATUSES),
  trigger: z.enum(BUILD_TRIGGERS),
  startedAt: z.iso.datetime(),
  endedAt: z.iso.datetime().nullable(),
  error: z.string().nullable(),
});
export type BuildSummary = z.infer<typeof BuildSummary>;

export const RepoRecord = z.object({
  id: z.string(),
  orgId: z.string(),
  url: z.string(),
  defaultBranch: z.string().nullable(),
  credential: SecretName.nullable(),
  setupCommands: z.array(z.string()),
  serviceCommands: z.array(ServiceCommand),
  envFiles: z.array(EnvFileSchema).default([]),
  snapshot: BuiltSnapshot.nullable().default(null),
  latestBuild: BuildSummary.nullable().default(null),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});
export type RepoRecord = z.infer<typeof RepoRecord>;

export const PrebuildRepo = z.object({ repoId: z.string(), workspacePath: z.string().optional() }).strict();
export type PrebuildRepo = z.infer<typeof PrebuildRepo>;

export const PrebuildRecord = z.object({
  id: z.string(),
  orgId: z.string(),
  name: z.string(),
  repos: z.array(PrebuildRepo),
  setupCommands: z.array(z.string()),
  /** The provider its builds (and so its snapshots) run on; a session on another provider skips the layer. */
  provider: ProviderType,
  snapshot: BuiltSnapshot.nullable().default(null),
  latestBuild: BuildSummary.nullable().default(null),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});
export type PrebuildRecord = z.infer<typeof PrebuildRecord>;

/** At most this many log lines, each at most this long, are kept per build (redacted). */
export const MAX_BUILD_LOG_LINES = 200;
export const MAX_BUILD_LOG_LINE_CHARS = 500;

export const BuildRecord = z.object({
  id: z.string(),
  orgId: z.string(),
  target: BuildTarget,
  provider: ProviderType,
  status: z.enum(BUILD_STATUSES),
  trigger: z.enum(BUILD_TRIGGERS),
  startedAt: z.iso.datetime(),
  endedAt: z.iso.datetime().nullable(),
  snapshotId: z.string().nullable(),
  sandboxId: z.string().nullable(),
  error: z.string().nullable(),
  /** Setup and verification output, redacted and bounded (MAX_BUILD_LOG_LINES). */
  log: z.array(z.string()),
  /** Milliseconds per builder step. */
  timings: z.record(z.string(), z.number()).default({}),
});
export type BuildRecord = z.infer<typeof BuildRecord>;

/** The last `MAX_BUILD_LOG_LINES` lines of `lines`, each cut to `MAX_BUILD_LOG_LINE_CHARS`. Pure. */
export function boundedLog(lines: readonly string[]): string[] {
  return lines.slice(-MAX_BUILD_LOG_LINES).map((l) => (l.length > MAX_BUILD_LOG_LINE_CHARS ? `${l.slice(0, MAX_BUILD_LOG_LINE_CHARS)}...` : l));
}

/**
 * Whether a build that started at `startedAt` may replace `current` as the target's snapshot:
 * only a newer build does (two builds racing: the one that started later has the later commit).
 */
export function supersedes(current: Pick<BuiltSnapshot, "startedAt"> | null, startedAt: string): boolean {
  return current === null || Date.parse(current.startedAt) < Date.parse(startedAt);
}

/** The API view: internals (org, the build bookkeeping of the snapshot) left out. */
export function toRepoView(r: RepoRecord) {
  const { orgId: _o, snapshot, ...rest } = r;
  return { ...rest, snapshot: snapshot ? { id: snapshot.id, builtAt: snapshot.builtAt } : null };
}

export function toPrebuildView(p: PrebuildRecord) {
  const { orgId: _o, snapshot, ...rest } = p;
  return { ...rest, snapshot: snapshot ? { id: snapshot.id, builtAt: snapshot.builtAt } : null };
}

export function toBuildView(b: BuildRecord) {
  const { orgId: _o, ...rest } = b;
  return rest;
}
