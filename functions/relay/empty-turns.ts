/**
 * An empty answer to a prompt we just sent is asked for again (issue 25 leftovers).
 *
 * OpenCode 1.18.33 reports a session idle a moment before its loop has ended; a prompt that lands
 * in that moment (seen on a loaded 2-core machine, never on an idle one: 0 of 8 prompts sent 0 to
 * 100 ms after the idle event, with and without an abort before it) is answered at once with
 * nothing: an assistant message with no text, no tool call and no error. The relay sees that turn
 * end (its `TurnOutcome` is `end_turn` and `empty`) and, when the prompt in `processing` has its
 * user message stored followed only by such answers (to it, or to an earlier message by the
 * ending loop) or by none, asks the agent for that answer again
 * (`AgentClient.answerAgain`: the empty answer is reverted and the user message sent again under
 * its own ids, so the agent's history and the transcript keep one copy of it). The prompt stays
 * `processing` until that turn ends. At most MAX_ANSWERS_AGAIN times per prompt: a model that
 * really answers nothing is left to do so.
 *
 * In that moment OpenCode still counts the session busy and refuses the revert (HTTP 409
 * `SessionBusyError`, test/adapter/opencode-agent-client.test.ts): the request is then kept and
 * made again after each of the session's next events (the loop's last updates, at worst OpenCode's
 * periodic `server.heartbeat`), at most MAX_BUSY_RETRIES times; a turn that starts meanwhile
 * drops it (that turn's end decides). Given up, the prompt completes with the empty answer.
 *
 * The check costs nothing on an ordinary turn: one prompt listing and one message listing only
 * at the end of an empty one.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";
import { AgentUnavailableError } from "../domain/errors";
import type { AgentClient, AgentEndpoint, AnswerAgain } from "../ports/agent-client";
import type { PromptQueue } from "../ports/session-items";
import type { AgentMessage, AgentMessageSource } from "./agent-messages";
import type { TurnOutcome } from "./event-translator";

export const MAX_ANSWERS_AGAIN = 2;
/** Events after which a request OpenCode refused as busy is made again, before giving up. */
export const MAX_BUSY_RETRIES = 10;

export interface EmptyTurnDeps {
  prompts: Pick<PromptQueue, "list">;
  agent: Pick<AgentClient, "answerAgain">;
  logger: Logger;
}

/** What a watch remembers: how often the prompt in flight was answered again. */
export interface EmptyTurnWatch {
  sessionId: string;
  endpoint: AgentEndpoint;
  agentSessionId: string;
  answeredAgain: { promptId: string; times: number } | null;
  /** A request OpenCode refused as busy (its loop still ending), made again after the next events. */
  pendingAnswer: { promptId: string; again: AnswerAgain; tries: number } | null;
}

/** OpenCode refuses to revert a session whose loop runs: HTTP 409 (`SessionBusyError`). */
function refusedAsBusy(err: unknown): boolean {
  return err instanceof AgentUnavailableError && err.context?.httpStatus === 409;
}

function said(message: AgentMessage): boolean {
  return message.parts.some((p) => (p.type === "text" && (p.text ?? "").trim() !== "") || p.type === "tool");
}

/** True when the prompt's turn was sent to the agent again (the turn goes on: no completion). */
export async function answerEmptyTurnAgain(deps: EmptyTurnDeps, watch: EmptyTurnWatch, outcome: TurnOutcome, messages: AgentMessageSource): Promise<boolean> {
  const answerAgain = deps.agent.answerAgain?.bind(deps.agent);
  if (!answerAgain || outcome.reason !== "end_turn" || !outcome.empty) return false;
  const prompt = (await deps.prompts.list(watch.sessionId, "processing"))[0];
  if (!prompt) return false;
  const times = watch.answeredAgain?.promptId === prompt.promptId ? watch.answeredAgain.times : 0;
  if (times >= MAX_ANSWERS_AGAIN) {
    deps.logger.warn("empty answer: asked again as often as allowed; leaving it", { sessionId: watch.sessionId, promptId: prompt.promptId, times });
    return false;
  }
  let stored: AgentMessage[];
  try {
    stored = await messages.listMessages(watch.endpoint, watch.agentSessionId);
  } catch (err) {
    deps.logger.warn("empty answer: the agent's messages could not be read", { sessionId: watch.sessionId, error: errorForLog(err) });
    return false;
  }
  // The prompt's user message (the newest holding its text), followed by nothing but empty,
  // completed, error-free answers: to it, or to an earlier message by a loop that was ending, or none.
  const at = stored.findLastIndex((m) => m.info.role === "user" && m.parts.some((p) => p.type === "text" && p.text === prompt.content));
  const user = stored[at];
  const part = user?.parts.find((p) => p.type === "text" && p.text === prompt.content);
  if (!user || !part) return false;
  const after = stored.slice(at + 1);
  if (after.some((m) => m.info.role !== "assistant" || m.info.error !== undefined || m.info.time.completed === undefined || said(m))) return false;
  const first = after[0];
  const last = after.at(-1);
  const model = last?.info.providerID && last.info.modelID ? `${last.info.providerID}/${last.info.modelID}` : undefined;
  const again: AnswerAgain = { ...(first ? { answerId: first.info.id } : {}), userMessageId: user.info.id, partId: part.id, text: prompt.content, ...(model ? { model } : {}) };
  try {
    await answerAgain(watch.endpoint, watch.agentSessionId, again);
  } catch (err) {
    if (refusedAsBusy(err)) {
      watch.pendingAnswer = { promptId: prompt.promptId, again, tries: 0 };
      deps.logger.info("empty answer: OpenCode's loop is still ending; asking again after its next event", { sessionId: watch.sessionId, promptId: prompt.promptId });
      return true;
    }
    deps.logger.warn("empty answer: could not ask again", { sessionId: watch.sessionId, promptId: prompt.promptId, error: errorForLog(err) });
    return false;
  }
  watch.answeredAgain = { promptId: prompt.promptId, times: times + 1 };
  deps.logger.warn("empty answer to a prompt just sent: asked again", { sessionId: watch.sessionId, promptId: prompt.promptId, answerId: first?.info.id ?? null, times: times + 1 });
  return true;
}

/**
 * After each event while a request waits (`pendingAnswer`, the agent idle): made again. `asked`:
 * the new answer is on its way; `waiting`: refused as busy again; `gave_up`: the prompt's turn is
 * over with its empty answer (the caller completes it); `none`: nothing waited.
 */
export async function retryPendingAnswer(deps: EmptyTurnDeps, watch: EmptyTurnWatch): Promise<"none" | "asked" | "waiting" | "gave_up"> {
  const pending = watch.pendingAnswer;
  const answerAgain = deps.agent.answerAgain?.bind(deps.agent);
  if (!pending || !answerAgain) return "none";
  try {
    await answerAgain(watch.endpoint, watch.agentSessionId, pending.again);
  } catch (err) {
    if (refusedAsBusy(err) && ++pending.tries < MAX_BUSY_RETRIES) return "waiting";
    watch.pendingAnswer = null;
    deps.logger.warn("empty answer: could not ask again; the prompt keeps its empty answer", { sessionId: watch.sessionId, promptId: pending.promptId, tries: pending.tries, error: errorForLog(err) });
    return "gave_up";
  }
  watch.pendingAnswer = null;
  const times = (watch.answeredAgain?.promptId === pending.promptId ? watch.answeredAgain.times : 0) + 1;
  watch.answeredAgain = { promptId: pending.promptId, times };
  deps.logger.warn("empty answer to a prompt just sent: asked again once OpenCode's loop ended", { sessionId: watch.sessionId, promptId: pending.promptId, times });
  return "asked";
}
