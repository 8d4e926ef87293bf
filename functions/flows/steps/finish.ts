/**
 * Flow step `finish`, on every path out of a flow (committed, skipped, failed, superseded):
 * release the lease, re-arm or cancel the expiry schedule, append the audit event with per-step
 * timings, push the final client status, and deliver prompts that queued up while the flow
 * held the lease (or wake the session for them). Each part is isolated: one failing does not
 * stop the others, and every part is idempotent, so the ASL may retry the whole step.
 */
import { errorForLog } from "../../observability/logger";
import type { LifecycleOutcome } from "../../ports/session-items";
import { broadcastStatus } from "../broadcast";
import type { FlowDocument } from "../flow-document";
import type { FlowDeps } from "../flow-deps";
import { finalClientStatus } from "../plan";
import { deliverQueuedPrompts } from "../prompt-delivery";
import { flowStep } from "../step";
import { stepEntry } from "../lambda-entry";

/** In the order the flows run them. */
const TIMED_STEPS = ["begin", "quiesce", "snapshot", "terminate", "provision", "commit", "recorded", "discarded"] as const;

export function outcomeOf(doc: FlowDocument): LifecycleOutcome {
  if (doc.superseded) return "superseded";
  if (doc.failure) return "failed";
  if (doc.commit) return "committed";
  return "skipped";
}

function timingsOf(doc: FlowDocument): Record<string, number> {
  const out: Record<string, number> = {};
  for (const step of TIMED_STEPS) {
    const ms = doc[step]?.ms;
    if (typeof ms === "number") out[step] = ms;
  }
  return out;
}

async function isolated(deps: FlowDeps, part: string, sessionId: string, run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (err) {
    deps.logger.error("finish part failed", { part, sessionId, error: errorForLog(err) });
  }
}

export const makeFinishStep = flowStep("finish", async (doc, deps) => {
  const outcome = outcomeOf(doc);
  if (doc.begin) {
    const lease = doc.begin.lease;
    await isolated(deps, "release", doc.sessionId, () => deps.sessions.releaseLease(lease));
  }
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) return { outcome };

  if (outcome === "committed") {
    await isolated(deps, "schedule", doc.sessionId, async () => {
      const target = { sessionId: session.id, purpose: "expiry" as const };
      if (session.status === "running" && session.sandboxExpiresAt) {
        const at = Date.parse(session.sandboxExpiresAt) - deps.config.EXPIRY_MIGRATION_LEAD_SECONDS * 1000;
        await deps.scheduler.arm(target, new Date(at));
      } else if (session.status !== "running") {
        await deps.scheduler.cancel(target);
      }
    });
  }

  await isolated(deps, "audit", doc.sessionId, () =>
    deps.events.append({
      eventId: doc.execution,
      sessionId: doc.sessionId,
      at: doc.begin?.startedAt ?? deps.now().toISOString(),
      flow: doc.flow,
      outcome,
      from: doc.begin?.fromStatus ?? null,
      to: session.status,
      reason: doc.reason ?? doc.begin?.skipReason ?? null,
      actor: doc.actor,
      execution: doc.execution,
      sandboxId: session.sandboxId,
      previousSandboxId: doc.begin?.sandboxId ?? null,
      message: (doc.superseded?.Cause ?? doc.failure?.Cause ?? doc.begin?.skipReason ?? null)?.slice(0, 500) ?? null,
      timings: timingsOf(doc),
    }),
  );

  // Tell clients where the session ended up when this flow changed it, or when they were shown
  // a progress status that nothing else will replace (record-failure already pushed its error).
  const shownProgress = Boolean(doc.begin?.progressStatus);
  if (outcome === "committed" || (outcome === "failed" && !doc.recorded && shownProgress)) {
    await isolated(deps, "push", doc.sessionId, () => broadcastStatus(deps, doc.sessionId, finalClientStatus(session.status), session.errorMessage ?? undefined));
  }

  let delivery = "none";
  await isolated(deps, "prompts", doc.sessionId, async () => {
    delivery = (await deliverQueuedPrompts(deps, doc.sessionId, { actor: `flow:${doc.execution}`, wakeFromError: false })).outcome;
  });
  return { outcome, status: session.status, delivery };
});

export const handler = stepEntry(makeFinishStep);
