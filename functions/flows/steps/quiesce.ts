/**
 * Flow step `quiesce` (seed 000 §6 `ensureOpenCodeStopped`): before an expiry migration
 * snapshots the sandbox, wait for the agent's in-flight turn to finish, polling its status, and
 * abort the turn once the wait (MIGRATION_TURN_WAIT_SECONDS, 30 s) is over. Best effort: an
 * unreachable agent does not block the migration (the ASL catches and carries on).
 */
import { agentEndpoint } from "../../agent/agent-endpoint";
import { NotFoundError } from "../../domain/errors";
import { flowStep } from "../step";
import { stepEntry } from "../lambda-entry";

const POLL_MS = 500;

export const makeQuiesceStep = flowStep("quiesce", async (doc, deps) => {
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) throw new NotFoundError(`session ${doc.sessionId} not found`);
  const url = session.openCodeUrl;
  const agentSessionId = session.codingAgentSessionId;
  if (!url || !agentSessionId) return { waitedMs: 0, aborted: false };
  const agent = await agentEndpoint(deps.sandboxKeys, session.id, url);
  const started = Date.now();
  const deadline = started + deps.config.MIGRATION_TURN_WAIT_SECONDS * 1000;
  while (await deps.agent.isBusy(agent, agentSessionId)) {
    if (Date.now() >= deadline) {
      await deps.agent.abort(agent, agentSessionId);
      return { waitedMs: Date.now() - started, aborted: true };
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, Math.max(0, deadline - Date.now()))));
  }
  return { waitedMs: Date.now() - started, aborted: false };
});

export const handler = stepEntry(makeQuiesceStep);
