/**
 * A user's prompt, from any edge (HTTP route, WebSocket frame, Slack, automations): stored
 * durably first, activity touched, then delivered (services/prompt-delivery.ts). One function so
 * every client type gets the same never-dropped, never-duplicated semantics.
 */
import { ConflictError, QuotaExceededError } from "../domain/errors";
import type { SessionRecord } from "../domain/session";
import type { QueuedPrompt } from "../ports/session-items";
import { deliverQueuedPrompts, type DeliveryDeps, type DeliveryOutcome } from "./prompt-delivery";

/** A prompt's author as clients see it: `user:<id>` -> `<id>`; other sources (`automation`, `slack:<team>:<user>`) as they are. */
export function authorOf(source: string): string {
  return source.startsWith("user:") ? source.slice("user:".length) : source;
}

export interface SubmittedPrompt {
  prompt: QueuedPrompt;
  /** Its status after delivery ran (`processing` when it went straight to the agent). */
  status: QueuedPrompt["status"];
  delivery: DeliveryOutcome;
  /** Prompts ahead of it (0 when it is the one being processed). */
  position: number;
}

/**
 * The queued-prompt cap (MAX_QUEUED_PROMPTS_PER_SESSION): prompts stored but not yet sent to the
 * agent. Checked before the prompt is stored, so a refused prompt leaves nothing behind.
 * Concurrent submits to one session may each see the last free place: the overshoot is at most
 * the number of submits in flight for that session.
 */
async function requireQueueRoom(deps: DeliveryDeps, sessionId: string, limit: number): Promise<void> {
  const queued = (await deps.prompts.list(sessionId, "queued")).length;
  if (queued >= limit) {
    throw new QuotaExceededError(
      `queued prompts: the session has ${queued} prompts waiting and the limit is ${limit}; wait for the agent to take some before sending more`,
      { context: { sessionId, queued, limit } },
    );
  }
}

export async function submitPrompt(
  deps: DeliveryDeps,
  session: SessionRecord,
  input: { content: string; source: string; maxQueued?: number; promptId?: string },
): Promise<SubmittedPrompt> {
  if (session.status === "stopped") {
    throw new ConflictError("session is stopped: cannot accept prompts", { context: { sessionId: session.id, status: session.status } });
  }
  const now = deps.now();
  // An Idempotency-Key's prompt stored before (a retry): nothing more is stored; delivery runs
  // again below (its moves are conditional, so it never sends a prompt twice) in case the first
  // request ended before it.
  const stored = input.promptId ? await deps.prompts.getKeyed(session.id, input.promptId) : null;
  if (!stored && input.maxQueued !== undefined) await requireQueueRoom(deps, session.id, input.maxQueued);
  const prompt =
    stored ??
    (input.promptId
      ? (await deps.prompts.enqueueOnce({ sessionId: session.id, promptId: input.promptId, content: input.content, source: input.source, now })).prompt
      : await deps.prompts.enqueue({ sessionId: session.id, content: input.content, source: input.source, now }));
  // The touch comes after the prompt is stored, and returns the session and lease as they are
  // then: delivery decides on them without reading the item again (issue 15). It also counts the
  // prompt (`promptsEnqueued`): a flow whose commit landed before it leaves this prompt to the
  // delivery below; one whose commit landed after it sees the count and looks at the queue.
  const known = await deps.sessions.touchActivityReturning(session.id, now, { promptQueued: true });
  const delivery = await deliverQueuedPrompts(deps, session.id, { actor: input.source, wakeFromError: true, known });
  // The org's limits refused the wake (402 / 429): the prompt is stored and runs when the session can.
  if (delivery.refusal) throw delivery.refusal;
  const open = await deps.prompts.listOpen(session.id);
  const index = open.findIndex((p) => p.promptId === prompt.promptId);
  return {
    prompt,
    status: open[index]?.status ?? "completed",
    delivery: delivery.outcome,
    position: Math.max(0, index),
  };
}
