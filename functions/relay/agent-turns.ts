/**
 * What the relay does about a turn besides streaming it (issue 25 §2, §3, §6), kept out of
 * relay.ts so the lease and stream machinery stays as it is:
 *
 * - permissions: OpenCode's `permission.asked` is answered by the session's `permissionPolicy`:
 *   `auto` replies `once` at once; `ask` sends clients a `permission.asked` frame and a client's
 *   `permission.reply` frame answers it (ws/handlers/message.ts); `permission.replied` tells
 *   clients the question is settled, whoever answered it;
 * - the end of a turn: `completed`, or `failed` with the reason and error; a failure that
 *   another model may not have (rate limit, auth, billing) is instead sent again on the next
 *   model of the session's `fallbackModels` (seed 004 model failover), with an `agent.failover`
 *   frame and a transcript note, and the prompt stays `processing` until that turn ends;
 * - a rate limit that OpenCode would retry forever (`session.status` `retry`) is cut short when
 *   a next model exists: the turn is aborted and fails over at its idle boundary;
 * - authors: a user message in the transcript carries the user id of the prompt it came from.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { SessionRecord } from "../domain/session";
import { errorForLog } from "../observability/logger";
import type { AgentClient, AgentEndpoint } from "../ports/agent-client";
import type { PromptFailure, PromptQueue, QueuedPrompt } from "../ports/session-items";
import type { SessionStore } from "../ports/session-store";
import type { TranscriptMessage, TranscriptStore } from "../ports/transcript";
import { authorOf } from "../services/submit-prompt";
import { FAILOVER_CODES, type AgentError } from "./agent-errors";
import type { EmptyTurnWatch } from "./empty-turns";
import type { TurnOutcome } from "./event-translator";
import { permissionAskOf, type PermissionAsk } from "./permission-asks";

export interface AgentTurnDeps {
  sessions: Pick<SessionStore, "getSession">;
  prompts: PromptQueue;
  agent: AgentClient;
  transcript: TranscriptStore;
  logger: Logger;
  now: () => Date;
}

/** What one watched session remembers between events. */
export interface TurnWatch {
  sessionId: string;
  endpoint: AgentEndpoint;
  agentSessionId: string;
  /** Questions put to clients (policy `ask`): only their settlement is announced. */
  asked: Set<string>;
  /** A failover decided before the turn ended (the relay aborted a rate-limited turn for it). */
  failover: Failover | null;
  /** The last prompt sent again after an abort, until its turn ended once: see `resendInterrupted`. */
  /** `resends`: how often the failover was sent again after its turn was cut short (at most MAX_RESENDS_AFTER_ABORT). */
  resentAfterAbort: { promptId: string; model: string; resends: number } | null;
  /** How often the prompt in flight was answered again after an empty answer (./empty-turns.ts). */
  answeredAgain: { promptId: string; times: number } | null;
  pendingAnswer: EmptyTurnWatch["pendingAnswer"];
}

export interface Failover {
  from: string | null;
  to: string;
  error: AgentError;
}

type Send = (message: { type: string } & Record<string, unknown>) => Promise<void>;

/** The model after `failed` in the session's chain; the first fallback when `failed` is the session's own model (or unknown). */
export function nextModel(session: Pick<SessionRecord, "fallbackModels">, failed: string | null): string | null {
  const chain = session.fallbackModels;
  const at = failed === null ? -1 : chain.indexOf(failed);
  return chain[at + 1] ?? null;
}

export async function onPermissionsAsked(deps: AgentTurnDeps, watch: TurnWatch, asks: PermissionAsk[], send: Send): Promise<void> {
  if (asks.length === 0) return;
  const session = await deps.sessions.getSession(watch.sessionId);
  const policy = session?.permissionPolicy ?? "auto";
  for (const ask of asks) {
    if (policy === "auto") {
      try {
        await deps.agent.replyPermission(watch.endpoint, ask.permissionId, "once");
        deps.logger.info("permission approved by policy", { sessionId: watch.sessionId, permissionId: ask.permissionId, permission: ask.permission });
      } catch (err) {
        // Answered already (a previous relay of the session), or the agent is gone: its stream says what comes next.
        deps.logger.warn("permission approval failed", { sessionId: watch.sessionId, permissionId: ask.permissionId, error: errorForLog(err) });
      }
      continue;
    }
    watch.asked.add(ask.permissionId);
    await send({ type: "permission.asked", ...ask });
  }
}

/**
 * Questions the agent asked before this watch began (a relay took the session over, after a drain
 * or a crash) or while its stream was down: OpenCode still waits on them, and no event will ask
 * again, so they are listed and handled as if just asked (policy `auto` approves them, `ask` puts
 * them to the clients again; a client answering twice gets `not_found`, nothing else). Only when
 * the agent is busy: an idle agent waits on nothing.
 */
export async function onPendingPermissions(deps: AgentTurnDeps, watch: TurnWatch, send: Send): Promise<void> {
  let pending;
  try {
    pending = await deps.agent.pendingPermissions(watch.endpoint, watch.agentSessionId);
  } catch (err) {
    // The stream just connected, so this is rare; the next reconnect lists them again.
    deps.logger.warn("pending permissions could not be listed", { sessionId: watch.sessionId, error: errorForLog(err) });
    return;
  }
  const asks = pending.map(permissionAskOf).filter((ask) => !watch.asked.has(ask.permissionId));
  await onPermissionsAsked(deps, watch, asks, send);
}

export async function onPermissionsReplied(watch: TurnWatch, replies: { permissionId: string; response: string }[], send: Send): Promise<void> {
  for (const reply of replies) {
    if (!watch.asked.delete(reply.permissionId)) continue;
    await send({ type: "permission.replied", permissionId: reply.permissionId, response: reply.response });
  }
}

/**
 * OpenCode waits out a rate limit and retries the same model forever: with a next model in the
 * chain, the turn is aborted now and fails over when it ends. Returns the error clients are
 * told about (the turn then ends with it, not as a cancel), or null when nothing was done.
 */
export async function onRetry(deps: AgentTurnDeps, watch: TurnWatch, error: AgentError, model: string | null): Promise<AgentError | null> {
  if (watch.failover || !FAILOVER_CODES.has(error.code)) return null;
  const session = await deps.sessions.getSession(watch.sessionId);
  const to = session ? nextModel(session, model) : null;
  if (!to) return null;
  watch.failover = { from: model, to, error };
  deps.logger.info("model failover: aborting a rate-limited turn", { sessionId: watch.sessionId, from: model, to, code: error.code });
  await deps.agent.abort(watch.endpoint, watch.agentSessionId);
  return error;
}

/**
 * The end of a turn that did not end well: either the prompt goes again on the next model
 * (returns null: the turn is not over for the queue) or its failure (for `completeTurn`).
 */
export async function settleFailedTurn(deps: AgentTurnDeps, watch: TurnWatch, outcome: TurnOutcome, send: Send): Promise<PromptFailure | null> {
  const planned = watch.failover;
  watch.failover = null;
  const error = planned?.error ?? outcome.error ?? { code: "agent_error" as const, message: "the turn ended in an error" };
  const failure: PromptFailure = { reason: planned ? "error" : outcome.reason === "canceled" ? "canceled" : "error", code: error.code, message: error.message };
  if (!FAILOVER_CODES.has(error.code)) return failure;
  const session = await deps.sessions.getSession(watch.sessionId);
  const from = planned?.from ?? outcome.model;
  const to = planned?.to ?? (session ? nextModel(session, from) : null);
  const prompt = (await deps.prompts.list(watch.sessionId, "processing"))[0];
  if (!to || !prompt) return failure;
  watch.resentAfterAbort = planned ? { promptId: prompt.promptId, model: to, resends: 0 } : null;
  const now = deps.now();
  await deps.transcript.upsert(failoverNote(watch.sessionId, prompt, { from, to, error }, now));
  await send({ type: "agent.failover", promptId: prompt.promptId, from, to, reason: error.code, message: error.message });
  try {
    await deps.agent.promptAsync(watch.endpoint, watch.agentSessionId, prompt.content, { model: to });
  } catch (err) {
    deps.logger.warn("model failover: the prompt could not be sent again", { sessionId: watch.sessionId, promptId: prompt.promptId, error: errorForLog(err) });
    return failure;
  }
  deps.logger.info("model failover", { sessionId: watch.sessionId, promptId: prompt.promptId, from, to, code: error.code });
  return null;
}

/**
 * How often a cut-short failover is sent again. Once was not enough on a loaded 2-core CI machine
 * (the resend joined the same dying loop: 2 of 12 runs of test/e2e/failover-repeat.test.ts).
 */
export const MAX_RESENDS_AFTER_ABORT = 3;

/**
 * OpenCode 1.18.33 reports a session idle after an abort a moment before its loop has ended: a
 * prompt sent in that moment joins the dying loop, which ends it at once with an empty answer and
 * no error (seen under load in test/e2e/agent-turns.test.ts). A failover sent right after the
 * relay's abort whose turn ended that way is sent again (up to MAX_RESENDS_AFTER_ABORT times); true when it was.
 */
export async function resendInterrupted(deps: AgentTurnDeps, watch: TurnWatch, outcome: TurnOutcome): Promise<boolean> {
  const resent = watch.resentAfterAbort;
  watch.resentAfterAbort = null;
  if (!resent || resent.resends >= MAX_RESENDS_AFTER_ABORT || outcome.reason !== "end_turn" || !outcome.empty) return false;
  const prompt = (await deps.prompts.list(watch.sessionId, "processing")).find((p) => p.promptId === resent.promptId);
  if (!prompt) return false;
  deps.logger.warn("model failover: the turn sent after the abort was cut short; sending it again", { sessionId: watch.sessionId, promptId: prompt.promptId, model: resent.model });
  await deps.agent.promptAsync(watch.endpoint, watch.agentSessionId, prompt.content, { model: resent.model });
  watch.resentAfterAbort = { ...resent, resends: resent.resends + 1 };
  return true;
}

function failoverNote(sessionId: string, prompt: QueuedPrompt, failover: Failover, now: Date): TranscriptMessage {
  const at = now.toISOString();
  return {
    sessionId,
    messageId: `note_failover_${prompt.promptId}_${now.getTime()}`,
    role: "system",
    text: `Model ${failover.from ?? "(default)"} failed (${failover.error.code}): ${failover.error.message} Trying ${failover.to}.`,
    parts: [],
    createdAt: at,
    completedAt: at,
    reason: "error",
    error: failover.error,
  };
}

/**
 * User messages get their prompt's author: the newest prompt already handed to the agent with
 * the same text (the agent knows nothing of prompt ids). Only when a user message is recorded:
 * one read of the open prompts (a turn's message is its processing prompt's), and of the
 * session's whole history only for a message none of those matches (a claim's catch-up).
 */
export async function withAuthors(deps: Pick<AgentTurnDeps, "prompts">, sessionId: string, records: TranscriptMessage[]): Promise<TranscriptMessage[]> {
  const unmatched = (sent: QueuedPrompt[]) => records.filter((r) => r.role === "user" && r.authorId === undefined && !sent.some((p) => p.content === r.text));
  if (unmatched([]).length === 0) return records;
  let sent = (await deps.prompts.listOpen(sessionId)).filter((p) => p.status === "processing");
  if (unmatched(sent).length > 0) sent = (await deps.prompts.list(sessionId)).filter((p) => p.status !== "queued");
  return records.map((r) => {
    if (r.role !== "user" || r.authorId !== undefined) return r;
    const prompt = sent.findLast((p) => p.content === r.text);
    return prompt ? { ...r, authorId: authorOf(prompt.source) } : r;
  });
}
