/**
 * Delivery of queued prompts (seed 001 "Prompt Queue", ARCHITECTURE.md §4 "no queued prompt is
 * ever lost"). Called by the prompt route right after it stores a prompt, and by every flow's
 * finish step right after it releases the lease; between the two, no prompt is stranded:
 *
 * - while a lifecycle flow holds the lease, delivery defers to that flow (it must not send a
 *   prompt into a sandbox that is being snapshotted or replaced); the flow delivers after its
 *   release, and the route stored the prompt before it looked at the lease;
 * - a running session gets one prompt at a time, FIFO (seed 001 "Dispatch logic"): the oldest
 *   queued prompt is sent when no prompt is processing and the agent is not busy; the
 *   queued -> processing move is a conditional write, so two deliverers never send the same
 *   prompt; the relay completes the turn on the agent's busy -> idle boundary (`completeTurn`)
 *   and that delivers the next; and only while a relay watches the session (a turn started
 *   before any relay listens would stream to nobody): the relay delivers when it claims;
 * - a session without a sandbox (starting, paused) is woken through `ensure-runtime`, whose
 *   finish delivers.
 */
import { agentEndpoint } from "../agent/agent-endpoint";
import type { SessionRecord } from "../domain/session";
import { errorForLog } from "../observability/logger";
import type { RelayLeaseStore, RelayNudge } from "../ports/relay";
import type { PromptFailure, QueuedPrompt } from "../ports/session-items";
import type { FlowDeps } from "../flows/flow-deps";
import type { AppError } from "../domain/errors";
import { admitToRun, isUsageRefusal } from "../usage/usage-gate";

export type DeliveryDeps = Pick<FlowDeps, "sessions" | "prompts" | "flows" | "agent" | "sandboxKeys" | "now" | "logger"> & {
  relayLeases: Pick<RelayLeaseStore, "watched">;
  /** Absent in the relay itself (it never nudges itself). */
  relayNudge?: RelayNudge;
  /** The org's limits: a wake they refuse starts nothing (absent: the flow's own admission decides). */
  usage?: FlowDeps["usage"];
  /** Told after a turn's prompts settled (the automation run ends from its prompt's turn: functions/automations/automation-runs.ts). */
  turnSettled?: (sessionId: string) => Promise<void>;
};

/** A prompt `processing` this long may have been stranded by a deliverer that died: the relay is nudged to check (relay.ts `strandedPromptMs`). */
const STRANDED_NUDGE_MS = 30_000;

/** Best effort: the relays' scan is the backstop. */
async function nudgeRelay(deps: DeliveryDeps, sessionId: string): Promise<boolean> {
  if (!deps.relayNudge) return false;
  try {
    await deps.relayNudge.nudge(sessionId);
    return true;
  } catch (err) {
    deps.logger.warn("relay nudge failed", { sessionId, error: errorForLog(err) });
    return false;
  }
}

/**
 * `sent`: a prompt went to the agent; `waiting`: behind the turn in progress; `deferred`: a
 * lifecycle flow holds the session and delivers when it finishes; `woken`: the session is being
 * resumed for it; `held`: the session cannot run prompts now (error, stopped); `none`: nothing queued.
 */
export type DeliveryOutcome = "none" | "sent" | "waiting" | "deferred" | "woken" | "held";

export interface DeliveryResult {
  outcome: DeliveryOutcome;
  sent: number;
  queued: number;
  /** Why a wake was refused (`held`): the org's credits are spent (402) or its running places taken (429). */
  refusal?: AppError;
}

export async function deliverQueuedPrompts(
  deps: DeliveryDeps,
  sessionId: string,
  options: {
    actor: string;
    wakeFromError: boolean;
    /**
     * The session and its lease as a write made after the prompt was stored returned them (the
     * prompt route's activity touch): no read here (issue 15). Without it, one read.
     */
    known?: { session: SessionRecord; lease: { owner: string | null; fence: number; expiresAt: number | null } };
    /** Wait this long before asking the agent whether it is busy (the relay at an idle boundary: AFTER_IDLE_SETTLE_MS). */
    settleMs?: number;
    /** The queued prompts as a read the caller just made returned them (the relay's catch-up reads every prompt once): no read here. */
    queued?: QueuedPrompt[];
  },
): Promise<DeliveryResult> {
  const queued = options.queued ?? (await deps.prompts.list(sessionId, "queued"));
  if (queued.length === 0) return { outcome: "none", sent: 0, queued: 0 };
  // The session and its lease from one read (issue 15: the prompt path read the item three times).
  const found = options.known ?? (await deps.sessions.getSessionWithLease(sessionId));
  if (!found) return { outcome: "none", sent: 0, queued: queued.length };
  const { session, lease } = found;
  if (lease.owner !== null && (lease.expiresAt ?? 0) > deps.now().getTime()) {
    return { outcome: "deferred", sent: 0, queued: queued.length };
  }
  const wake = async (): Promise<DeliveryResult> => {
    // API.md "Usage, limits and credits": the prompt stays queued and runs when the session can run again.
    if (deps.usage) {
      try {
        await admitToRun(deps.usage, session, deps.now());
      } catch (err) {
        if (!isUsageRefusal(err)) throw err;
        return { outcome: "held", sent: 0, queued: queued.length, refusal: err };
      }
    }
    await deps.flows.start({ flow: "ensure-runtime", sessionId, generation: lease.fence, actor: options.actor, reason: "prompt" });
    return { outcome: "woken", sent: 0, queued: queued.length };
  };
  switch (session.status) {
    case "starting":
    case "paused":
      return wake();
    case "error":
      return options.wakeFromError ? wake() : { outcome: "held", sent: 0, queued: queued.length };
    case "stopped":
      return { outcome: "held", sent: 0, queued: queued.length };
    case "running":
      break;
  }
  const url = session.openCodeUrl;
  const agentSessionId = session.codingAgentSessionId;
  if (!url || !agentSessionId) {
    // A running session always has both (ensure-runtime commits them together); if not, the
    // next ensure-runtime repairs it and delivers.
    deps.logger.warn("running session without an agent endpoint: prompts stay queued", { sessionId });
    return { outcome: "held", sent: 0, queued: queued.length };
  }
  const waiting: DeliveryResult = { outcome: "waiting", sent: 0, queued: queued.length };
  if (!(await deps.relayLeases.watched(sessionId, deps.now()))) {
    // Nobody watches it yet (a resume just committed, its relay died): a relay claims it now
    // (in process locally, before this returns) and delivers on claim if this still waits.
    if (!(await nudgeRelay(deps, sessionId)) || !(await deps.relayLeases.watched(sessionId, deps.now()))) return waiting;
  }
  const processing = await deps.prompts.list(sessionId, "processing");
  if (processing.length > 0) {
    // Its deliverer may have died before sending it: the relay checks when nudged (no relay polls for it).
    if (processing.some((p) => deps.now().getTime() - Date.parse(p.updatedAt) > STRANDED_NUDGE_MS)) await nudgeRelay(deps, sessionId);
    return waiting;
  }
  const agent = await agentEndpoint(deps.sandboxKeys, sessionId, url);
  if (options.settleMs) await new Promise((resolve) => setTimeout(resolve, options.settleMs));
  if (await deps.agent.isBusy(agent, agentSessionId)) return waiting;
  for (const prompt of queued) {
    // Lost the race for this one: another deliverer sent it; the next turn takes the rest.
    if (!(await deps.prompts.move(prompt, "queued", "processing", deps.now()))) return waiting;
    try {
      await deps.agent.promptAsync(agent, agentSessionId, prompt.content);
      return { outcome: "sent", sent: 1, queued: queued.length };
    } catch (err) {
      // Not delivered: back to the queue, in order, for the next delivery.
      await deps.prompts.move(prompt, "processing", "queued", deps.now());
      deps.logger.warn("prompt delivery failed: requeued", { sessionId, promptId: prompt.promptId, error: errorForLog(err) });
      return { outcome: "held", sent: 0, queued: queued.length };
    }
  }
  return waiting;
}

/**
 * The agent finished a turn (busy -> idle, seen by the relay): the prompt in `processing` is
 * `completed` (or `failed` with `failure`: the turn ended in an error or was canceled, issue 25
 * §2), and the next queued prompt goes out.
 */
/**
 * OpenCode 1.18.33 reports a session idle a moment before its loop has ended: a prompt sent in
 * that moment joins the dying loop, which ends it at once with an empty answer (seen on a loaded
 * 2-core CI machine: the second of three queued prompts answered with nothing,
 * test/e2e/websocket.test.ts "prompts queue FIFO"). The next queued prompt goes this long after
 * the idle boundary. A mitigation of OpenCode's behaviour, like `resendInterrupted` after an abort.
 * Kept beside the fix (relay/empty-turns.ts asks for an empty answer again): the window could not
 * be hit on demand (0 of 8 prompts sent 0-100 ms after the idle event, with or without an abort
 * before it), so whether every early-idle turn has the shape that fix recognises is unmeasured;
 * 300 ms per queued prompt is cheap insurance.
 */
export const AFTER_IDLE_SETTLE_MS = 300;

export async function completeTurn(
  deps: DeliveryDeps,
  sessionId: string,
  options: { actor: string; startedBefore?: Date; failure?: PromptFailure | null },
): Promise<DeliveryResult> {
  for (const prompt of await deps.prompts.list(sessionId, "processing")) {
    // A prompt sent after the turn began is not this turn's: it waits for its own idle boundary.
    if (options.startedBefore && Date.parse(prompt.updatedAt) > options.startedBefore.getTime()) continue;
    if (options.failure) await deps.prompts.move(prompt, "processing", "failed", deps.now(), { failure: options.failure });
    else await deps.prompts.move(prompt, "processing", "completed", deps.now());
  }
  if (deps.turnSettled) {
    await deps.turnSettled(sessionId).catch((err: unknown) => deps.logger.warn("turn-settled observer failed", { sessionId, error: errorForLog(err) }));
  }
  return deliverQueuedPrompts(deps, sessionId, { actor: options.actor, wakeFromError: false, settleMs: AFTER_IDLE_SETTLE_MS });
}
