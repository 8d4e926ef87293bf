/**
 * An org's metered usage and its limits (API.md "Usage, limits and credits"). The DynamoDB
 * adapter is functions/store/dynamo-org-usage.ts; the exactly-once design is in its header.
 */
import type { AgentModel } from "../domain/agent-settings";
import type { OrgLimits, UsageDay } from "../domain/usage";

export interface MeterInput {
  orgId: string;
  sessionId: string;
  /** The session's provider: the seconds added also count as `SandboxSeconds` by provider (issue 19). */
  provider?: string;
  /** The running interval's start (the session's `runningSince`): the usage items are keyed by it. */
  intervalStart: string;
  /** Meter the interval up to here (now for a running session; the transition time when it ends). */
  until: Date;
  /** Only the UTC days from this one on (the metering pass: days an earlier pass already closed are not written again). */
  since?: Date;
  /**
   * The interval ended at `until` (a transition out of running): its items are written as they
   * finally are and closed, so a metering pass that read the session while it still ran can
   * neither extend them past the end nor write them again.
   */
  final?: boolean;
}

export interface OrgUsageStore {
  /** Records `[intervalStart, until]` (idempotent, monotonic); returns the seconds this call added. */
  meterInterval(input: MeterInput): Promise<number>;
  /** Metered usage by UTC day, `from`..`to` inclusive (`YYYY-MM-DD`), days without usage left out. */
  usageByDay(orgId: string, from: string, to: string): Promise<UsageDay[]>;
  /** Seconds metered in the UTC month `at` falls in. */
  spentInMonth(orgId: string, at: Date): Promise<number>;
  getLimits(orgId: string): Promise<OrgLimits>;
  /**
   * The org's limits and its default agent model (its settings, `GET /v1/org/model`) in one
   * read: `ensure-runtime` admits a session by the one and boots it with the other (issue 15).
   */
  getLimitsAndModel(orgId: string): Promise<{ limits: OrgLimits; model: AgentModel | null }>;
  /** Changes the given limits (others kept); returns them all. */
  putLimits(orgId: string, changes: Partial<OrgLimits>, now: Date): Promise<OrgLimits>;
  /**
   * Takes one of the org's `max` running places for the session (kept while it runs; idempotent
   * for a session that holds one). False when all are taken by sessions that still run or are
   * being started.
   */
  acquireRunningSlot(orgId: string, sessionId: string, max: number, now: Date): Promise<boolean>;
  /** Running sessions of the org (a count over its sessions). */
  countRunning(orgId: string): Promise<number>;
}
