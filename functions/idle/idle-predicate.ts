/**
 * The idle predicate (seed 002 "Trigger", constraints 2, 4, 10, 13): pure, over facts read from
 * the session's partition. One function decides for the idle-check schedule, for the
 * `idle-snapshot` flow's re-check under the lease, and for the sweeper, so they can never
 * disagree about what "idle" means.
 *
 * The six conditions, in the seed's order, plus one of ours:
 *   1. no WebSocket clients;  2. no live proxy connections (terminal / editor);
 *   3. the agent is idle (the relay's last word, `agentBusy`);
 *   4. the relay watches the agent (SSE ready) or the agent was known idle (`lastKnownAgentIdleAt`);
 *   5. the session is running on a sandbox;  6. the grace since `lastActivityAt` has elapsed;
 *   +  no prompt queued or in flight: work the user asked for is never snapshotted away.
 *
 * Modes, chosen by whoever starts the flow (the pause reason):
 * - `inactivity`: all of the above;
 * - `orphaned` (sweeper, no live relay): nobody watches the agent, so 3, 4 and the prompt check
 *   are left to the flow's direct probe of the agent before it snapshots;
 * - `sandbox_lost` (sweeper, the provider says the sandbox is gone): only 5 — there is nothing
 *   left to protect, and the flow confirms the loss with the provider first.
 */
import type { ClientType, SessionRecord } from "../domain/session";

export const IDLE_MODES = ["inactivity", "orphaned", "sandbox_lost"] as const;
export type IdleMode = (typeof IDLE_MODES)[number];

export function idleModeOf(reason: string | null | undefined): IdleMode {
  return (IDLE_MODES as readonly string[]).includes(reason ?? "") ? (reason as IdleMode) : "inactivity";
}

export interface IdleGraceConfig {
  /** Web (and CLI) sessions: a person may come back after a tab refresh. */
  IDLE_SNAPSHOT_DELAY_SECONDS: number;
  /** Automation and Slack sessions: nobody refreshes a tab. */
  AUTOMATION_IDLE_GRACE_SECONDS: number;
}

const HEADLESS: readonly ClientType[] = ["automation", "slack"];

/** Grace by client type (seed 002 `getIdleGraceMs`). */
export function idleGraceSeconds(clientType: ClientType, config: IdleGraceConfig): number {
  return HEADLESS.includes(clientType) ? config.AUTOMATION_IDLE_GRACE_SECONDS : config.IDLE_SNAPSHOT_DELAY_SECONDS;
}

export type IdleSession = Pick<SessionRecord, "status" | "sandboxId" | "clientType" | "lastActivityAt" | "agentBusy" | "lastKnownAgentIdleAt">;

export interface IdleFacts {
  session: IdleSession;
  clients: number;
  /** Live (unexpired) proxy connections. */
  proxies: number;
  /** A relay holds a live lease on the session: its SSE stream is (being) kept open. */
  relayWatching: boolean;
  /** Prompts queued or processing. */
  pendingPrompts: number;
  now: Date;
}

export const NOT_IDLE_REASONS = [
  "not_running",
  "no_sandbox",
  "clients_connected",
  "proxy_connected",
  "agent_busy",
  "agent_state_unknown",
  "prompts_pending",
  "in_grace",
] as const;
export type NotIdleReason = (typeof NOT_IDLE_REASONS)[number];

export interface IdleVerdict {
  idle: boolean;
  /** The first condition that failed; null when idle. */
  reason: NotIdleReason | null;
  /** `lastActivityAt + grace`: when the grace runs (ran) out. */
  graceExpiresAt: Date;
  /**
   * When to look again without waiting for an event: only while the grace is the one thing in
   * the way. Every other blocker clears through an event that arms its own check (the last client
   * leaves, the agent goes idle, a proxy closes, a turn completes), with the sweeper as backstop.
   */
  recheckAt: Date | null;
}

export function evaluateIdle(facts: IdleFacts, mode: IdleMode, config: IdleGraceConfig): IdleVerdict {
  const { session } = facts;
  const graceExpiresAt = new Date(Date.parse(session.lastActivityAt) + idleGraceSeconds(session.clientType, config) * 1000);
  const no = (reason: NotIdleReason, recheckAt: Date | null = null): IdleVerdict => ({ idle: false, reason, graceExpiresAt, recheckAt });
  if (session.status !== "running") return no("not_running");
  if (!session.sandboxId) return no("no_sandbox");
  if (mode === "sandbox_lost") return { idle: true, reason: null, graceExpiresAt, recheckAt: null };
  if (facts.clients > 0) return no("clients_connected");
  if (facts.proxies > 0) return no("proxy_connected");
  if (mode === "inactivity") {
    if (session.agentBusy) return no("agent_busy");
    if (!facts.relayWatching && session.lastKnownAgentIdleAt === null) return no("agent_state_unknown");
    if (facts.pendingPrompts > 0) return no("prompts_pending");
  }
  if (facts.now.getTime() < graceExpiresAt.getTime()) return no("in_grace", graceExpiresAt);
  return { idle: true, reason: null, graceExpiresAt, recheckAt: null };
}
