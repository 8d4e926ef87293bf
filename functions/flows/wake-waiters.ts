/**
 * Issue 25 §1: whoever joins a session while a flow is pausing it ends on a running session.
 * Seed 002 "Resume flow": a client that connects during an idle snapshot waits for the lock and
 * then resumes from the snapshot just taken. Here nothing blocks: `$connect` and the resume
 * route see `running` and answer at once, so the pausing flow itself, once it has committed
 * `paused`, starts `ensure-runtime` for them (called by `finish`).
 *
 * Who counts as waiting: a live WebSocket connection registered after the flow's execution
 * started, or a resume asked for after it (`SessionStore.requestResume`). Prompts are not
 * looked at here: a queued prompt wakes the session through prompt delivery anyway.
 *
 * A user pause is not undone by the clients that were already connected when the pause was
 * asked for (the user pressing "pause" is one of them): only later arrivals wake it, exactly as
 * connecting to a paused session a moment later would. `sandbox_lost` is the same rule.
 *
 * Races: `$connect` registers its connection and then re-reads the session; this reads the
 * connections after the commit. Both are strongly consistent, so either the connect sees
 * `paused` (and starts `ensure-runtime` itself) or this sees the connection; both at once start
 * one execution between them (same name at the same fence), and the second one skips anyway.
 */
import { isLiveConnection } from "../domain/connection-liveness";
import type { SessionRecord } from "../domain/session";
import type { ClientConnection } from "../ports/session-items";
import type { FlowDeps } from "./flow-deps";
import type { FlowDocument } from "./flow-document";

const PAUSING_FLOWS: readonly FlowDocument["flow"][] = ["pause", "idle-snapshot", "migrate"];

export type WakeOutcome = "none" | "clients" | "resume";

/** When the flow began, as far as arrivals are concerned: its execution's start, else its lease. */
function flowStartedAt(doc: FlowDocument): number {
  return Date.parse(doc.started?.at ?? doc.begin?.executionStartedAt ?? doc.begin?.startedAt ?? "");
}

/**
 * `session`: as the flow's commit write returned it (or read after it), `resumeRequestedAt`
 * included, so a resume asked for before the commit is seen without a read (issue 15).
 * `connections`: the session's connections listed after the commit (Finish lists them once for
 * its status push and for this); listed here when not given.
 */
export async function wakeWaiters(
  deps: Pick<FlowDeps, "sessions" | "connections" | "flows" | "now" | "logger">,
  doc: FlowDocument,
  session: SessionRecord,
  connections?: readonly ClientConnection[],
): Promise<WakeOutcome> {
  if (!PAUSING_FLOWS.includes(doc.flow) || session.status !== "paused") return "none";
  const since = flowStartedAt(doc);
  if (!Number.isFinite(since)) return "none";
  const now = deps.now();
  const live = connections ? connections.filter((c) => isLiveConnection(c, now)) : await deps.connections.listLive(session.id, now);
  const joined = live.filter((c) => Date.parse(c.connectedAt) >= since);
  const resumeAskedAt = joined.length > 0 || !session.resumeRequestedAt ? null : new Date(session.resumeRequestedAt);
  const outcome: WakeOutcome = joined.length > 0 ? "clients" : resumeAskedAt && resumeAskedAt.getTime() >= since ? "resume" : "none";
  if (outcome === "none") return outcome;
  const lease = await deps.sessions.readLease(session.id);
  await deps.flows.start({
    flow: "ensure-runtime",
    sessionId: session.id,
    generation: lease?.fence ?? 0,
    actor: `flow:${doc.execution}`,
    reason: outcome === "clients" ? "client joined during pause" : "resume during pause",
  });
  deps.logger.info("paused session resumed for whoever joined meanwhile", { sessionId: session.id, flow: doc.flow, joined: joined.length, outcome });
  return outcome;
}
