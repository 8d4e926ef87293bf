/**
 * The relay's answer to an empty answer (functions/relay/empty-turns.ts): which turns are asked
 * for again, with what, how often, and what happens when OpenCode refuses because its loop is
 * still ending (HTTP 409, as test/adapter/opencode-agent-client.test.ts measures on the binary).
 */
import { describe, expect, it } from "vitest";
import { AgentUnavailableError } from "../../functions/domain/errors";
import { createLogger } from "../../functions/observability/logger";
import type { AnswerAgain } from "../../functions/ports/agent-client";
import type { QueuedPrompt } from "../../functions/ports/session-items";
import type { AgentMessage } from "../../functions/relay/agent-messages";
import { answerEmptyTurnAgain, MAX_ANSWERS_AGAIN, MAX_BUSY_RETRIES, retryPendingAnswer, type EmptyTurnWatch } from "../../functions/relay/empty-turns";
import type { TurnOutcome } from "../../functions/relay/event-translator";

const busy = () => new AgentUnavailableError("OpenCode revert failed: HTTP 409", { context: { operation: "revert", httpStatus: 409 } });

function harness(options: { refusals?: number; answer?: Partial<AgentMessage["info"]>; answerParts?: AgentMessage["parts"]; noAnswer?: boolean } = {}) {
  const prompt: QueuedPrompt = { promptId: "prm_1", sessionId: "ses_1", content: "hello", status: "processing", source: "user:alice", createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-01T00:00:00.000Z" };
  const asked: AnswerAgain[] = [];
  let refusals = options.refusals ?? 0;
  const stored: AgentMessage[] = [
    { info: { id: "msg_u", role: "user", time: { created: 1 } }, parts: [{ id: "prt_u", type: "text", text: "hello" }] },
    { info: { id: "msg_a", role: "assistant", parentID: "msg_u", providerID: "dev", modelID: "echo", time: { created: 2, completed: 3 }, ...options.answer }, parts: options.answerParts ?? [{ id: "prt_s", type: "step-start" }] },
  ];
  if (options.noAnswer) stored.pop();
  const deps = {
    prompts: { list: () => Promise.resolve([prompt]) },
    agent: {
      answerAgain: (_e: unknown, _s: string, again: AnswerAgain) => {
        if (refusals-- > 0) return Promise.reject(busy());
        asked.push(again);
        return Promise.resolve();
      },
    },
    logger: createLogger("empty-turns-test"),
  };
  const watch: EmptyTurnWatch = { sessionId: "ses_1", endpoint: { url: "http://agent.invalid", authorization: null }, agentSessionId: "ses_agent", answeredAgain: null, pendingAnswer: null };
  const messages = { listMessages: () => Promise.resolve(stored) };
  return { deps, watch, messages, asked };
}

const empty: TurnOutcome = { reason: "end_turn", error: null, model: "dev/echo", empty: true };

describe("answerEmptyTurnAgain", () => {
  it("an empty answer to the prompt's user message: asked again with its ids and model, at most MAX_ANSWERS_AGAIN times", async () => {
    const h = harness();
    for (let i = 0; i < MAX_ANSWERS_AGAIN; i++) expect(await answerEmptyTurnAgain(h.deps, h.watch, empty, h.messages)).toBe(true);
    expect(await answerEmptyTurnAgain(h.deps, h.watch, empty, h.messages)).toBe(false);
    expect(h.asked).toEqual(Array.from({ length: MAX_ANSWERS_AGAIN }, () => ({ answerId: "msg_a", userMessageId: "msg_u", partId: "prt_u", text: "hello", model: "dev/echo" })));
  });

  it("not for a turn that said something, failed, or whose answer is not the prompt's", async () => {
    expect(await answerEmptyTurnAgain(harness().deps, harness().watch, { ...empty, empty: false }, harness().messages)).toBe(false);
    expect(await answerEmptyTurnAgain(harness().deps, harness().watch, { ...empty, reason: "error" }, harness().messages)).toBe(false);
    for (const h of [harness({ answer: { error: { name: "APIError" } } }), harness({ answerParts: [{ id: "t", type: "text", text: "hi" }] }), harness({ answer: { time: { created: 2 } } })]) {
      expect(await answerEmptyTurnAgain(h.deps, h.watch, empty, h.messages)).toBe(false);
      expect(h.asked).toEqual([]);
    }
  });

  it("the ending loop's empty answer to an earlier message, or no answer at all: the prompt's user message is asked for again", async () => {
    const other = harness({ answer: { parentID: "msg_earlier" } });
    expect(await answerEmptyTurnAgain(other.deps, other.watch, empty, other.messages)).toBe(true);
    expect(other.asked).toEqual([{ answerId: "msg_a", userMessageId: "msg_u", partId: "prt_u", text: "hello", model: "dev/echo" }]);
    const none = harness({ noAnswer: true });
    expect(await answerEmptyTurnAgain(none.deps, none.watch, empty, none.messages)).toBe(true);
    expect(none.asked).toEqual([{ userMessageId: "msg_u", partId: "prt_u", text: "hello" }]);
  });

  it("refused as busy (OpenCode's loop still ending): kept, asked again after the next events until accepted", async () => {
    const h = harness({ refusals: 3 });
    expect(await answerEmptyTurnAgain(h.deps, h.watch, empty, h.messages)).toBe(true);
    expect(h.watch.pendingAnswer?.promptId).toBe("prm_1");
    expect(await retryPendingAnswer(h.deps, h.watch)).toBe("waiting");
    expect(await retryPendingAnswer(h.deps, h.watch)).toBe("waiting");
    expect(await retryPendingAnswer(h.deps, h.watch)).toBe("asked");
    expect(h.asked).toHaveLength(1);
    expect(h.watch.pendingAnswer).toBeNull();
    expect(h.watch.answeredAgain).toEqual({ promptId: "prm_1", times: 1 });
    expect(await retryPendingAnswer(h.deps, h.watch)).toBe("none");
  });

  it("refused as busy every time: given up after MAX_BUSY_RETRIES events", async () => {
    const h = harness({ refusals: 1000 });
    expect(await answerEmptyTurnAgain(h.deps, h.watch, empty, h.messages)).toBe(true);
    const results: string[] = [];
    for (let i = 0; i < MAX_BUSY_RETRIES; i++) results.push(await retryPendingAnswer(h.deps, h.watch));
    expect(results.at(-1)).toBe("gave_up");
    expect(results.slice(0, -1).every((r) => r === "waiting")).toBe(true);
    expect(h.watch.pendingAnswer).toBeNull();
  });
});
