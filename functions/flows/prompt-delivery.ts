/**
 * Delivery of queued prompts (seed 001 "Prompt Queue", ARCHITECTURE.md §4 "no queued prompt is
 * ever lost"). Called by the prompt route right after it stores a prompt, and by every flow's
 * finish step right after it releases the lease; between the two, no prompt is stranded:
 *
 * - while a lifecycle flow holds the lease, delivery defers to that flow (it must not send a
 *   prompt into a sandbox that is being snapshotted or replaced); the flow delivers after its
 *   release, and the route stored the prompt before it looked at the lease;
 * - a running session gets each queued prompt sent once: the queued -> processing move is a
 *   conditional write, so two deliverers never send the same prompt;
 * - a session without a sandbox (starting, paused) is woken through `ensure-runtime`, whose
 *   finish delivers.
 */
import { errorForLog } from "../observability/logger";
import type { FlowDeps } from "./flow-deps";

export type DeliveryOutcome = "none" | "sent" | "deferred" | "woken" | "held";

export interface DeliveryResult {
  outcome: DeliveryOutcome;
  sent: number;
  queued: number;
}

export async function deliverQueuedPrompts(
  deps: Pick<FlowDeps, "sessions" | "prompts" | "flows" | "agent" | "now" | "logger">,
  sessionId: string,
  options: { actor: string; wakeFromError: boolean },
): Promise<DeliveryResult> {
  const queued = await deps.prompts.list(sessionId, "queued");
  if (queued.length === 0) return { outcome: "none", sent: 0, queued: 0 };
  const lease = await deps.sessions.readLease(sessionId);
  const session = await deps.sessions.getSession(sessionId);
  if (!session || !lease) return { outcome: "none", sent: 0, queued: queued.length };
  if (lease.owner !== null && (lease.expiresAt ?? 0) > deps.now().getTime()) {
    return { outcome: "deferred", sent: 0, queued: queued.length };
  }
  const wake = async (): Promise<DeliveryResult> => {
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
  let sent = 0;
  for (const prompt of queued) {
    if (!(await deps.prompts.move(prompt, "queued", "processing", deps.now()))) continue;
    try {
      await deps.agent.promptAsync(url, agentSessionId, prompt.content);
      sent++;
    } catch (err) {
      // Not delivered: back to the queue, in order, for the next delivery.
      await deps.prompts.move(prompt, "processing", "queued", deps.now());
      deps.logger.warn("prompt delivery failed: requeued", { sessionId, promptId: prompt.promptId, error: errorForLog(err) });
      break;
    }
  }
  return { outcome: "sent", sent, queued: queued.length };
}
