/**
 * The relay's event translator replaying recorded OpenCode SSE streams
 * (test/fixtures/opencode): the exact client message sequence, the transcript records, and one
 * busy -> idle transition per turn derived from state, not from event names (seed 002 c. 9).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../functions/ports/agent-client";
import type { AgentMessage } from "../../functions/relay/agent-messages";
import type { TranscriptMessage } from "../../functions/ports/transcript";
import { EventTranslator, type RelayClientMessage, type Translation } from "../../functions/relay/event-translator";

const AGENT_SESSION = "ses_dff6dec16ffeJtGK53goJY0q3e";
const SESSION = "ses_relaytest000000000000000";

function fixture(name: string): AgentEvent[] {
  return readFileSync(new URL(`../fixtures/opencode/${name}`, import.meta.url), "utf8")
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => JSON.parse(line.slice("data: ".length)) as AgentEvent);
}

/** Replays events; a flat log of client messages and transitions in order, plus the records. */
function replay(events: AgentEvent[], translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION })) {
  const log: (RelayClientMessage | { transition: string })[] = [];
  const records: Translation["finalized"] = [];
  for (const event of events) {
    const t = translator.apply(event);
    log.push(...t.client);
    records.push(...t.finalized);
    if (t.transition) log.push({ transition: t.transition });
  }
  return { log, records, translator };
}

const ECHO_USER = "msg_200921504001OaDIn8IR5WRA4U";
const ECHO_ASSISTANT = "msg_200921b3300100kWt1Qi40lvw2";
const ECHO_PART = "prt_200921ce70011kb39dQr4sbSEX";
const SLEEP_USER = "msg_200922df0001jXQZzJQGHNm59R";
const TOOL_MESSAGE = "msg_200922e020017mMRpQ7UERqJJv";
const TOOL_PART = "prt_200922e5b0011X3YrC4HBDDDOL";
const SLEEP_ANSWER = "msg_2009236e8001TQfjaA0lnQlik4";
const SLEEP_PART = "prt_20092373b0016jc2Gw1y8xxyMF";

const delta = (messageId: string, partId: string, d: string) => ({ type: "message.part.text-delta", messageId, partId, delta: d });

/** The tool call's arguments, as OpenCode streams them once they are complete. */
const SLEEP_INPUT = { command: "sleep 2", description: "Sleep for 2 seconds" };

const SLEEP_TURN = [
  { transition: "busy" },
  { type: "message.create", messageId: TOOL_MESSAGE, role: "assistant" },
  { type: "message.part.tool-update", messageId: TOOL_MESSAGE, partId: TOOL_PART, tool: "bash", status: "pending" },
  { type: "message.part.tool-update", messageId: TOOL_MESSAGE, partId: TOOL_PART, tool: "bash", status: "running", input: SLEEP_INPUT },
  { type: "message.part.tool-update", messageId: TOOL_MESSAGE, partId: TOOL_PART, tool: "bash", status: "completed", title: "sleep 2", input: SLEEP_INPUT, output: "(no output)" },
  { type: "message.finalize", messageId: TOOL_MESSAGE, text: "", reason: "end_turn" },
  { type: "message.create", messageId: SLEEP_ANSWER, role: "assistant" },
  delta(SLEEP_ANSWER, SLEEP_PART, "echo: "),
  delta(SLEEP_ANSWER, SLEEP_PART, "please"),
  delta(SLEEP_ANSWER, SLEEP_PART, " sleep"),
  delta(SLEEP_ANSWER, SLEEP_PART, " 2s"),
  { type: "message.finalize", messageId: SLEEP_ANSWER, text: "echo: please sleep 2s", reason: "end_turn" },
  { transition: "idle" },
];

describe("EventTranslator on recorded OpenCode turns", () => {
  it("echo fixture: create, deltas that concatenate to the echo, finalize; then the sleep turn; one busy->idle per turn", () => {
    const { log, translator } = replay(fixture("sse-echo-turn.txt"));
    expect(log).toEqual([
      { transition: "busy" },
      { type: "message.create", messageId: ECHO_ASSISTANT, role: "assistant" },
      delta(ECHO_ASSISTANT, ECHO_PART, "echo:"),
      delta(ECHO_ASSISTANT, ECHO_PART, " hell"),
      delta(ECHO_ASSISTANT, ECHO_PART, "o wor"),
      delta(ECHO_ASSISTANT, ECHO_PART, "ld"),
      { type: "message.finalize", messageId: ECHO_ASSISTANT, text: "echo: hello world", reason: "end_turn" },
      { transition: "idle" },
      ...SLEEP_TURN,
    ]);
    const deltas = log.filter((m): m is RelayClientMessage & { delta: string } => "type" in m && m.type === "message.part.text-delta" && m.messageId === ECHO_ASSISTANT);
    expect(deltas.map((d) => d.delta).join("")).toBe("echo: hello world");
    expect(translator.busy).toBe(false);
    expect(translator.openMessages()).toEqual([]);
  });

  it("sleep fixture: tool updates pending -> running -> completed (duplicates folded), two assistant messages finalized, one turn", () => {
    const { log } = replay(fixture("sse-sleep-tool-turn.txt"));
    expect(log).toEqual(SLEEP_TURN);
  });

  it("records both sides of the transcript: user text and finalized assistant messages, with the agent's times", () => {
    const { records } = replay(fixture("sse-echo-turn.txt"));
    expect(records.map((r) => [r.role, r.messageId, r.text])).toEqual([
      ["user", ECHO_USER, "hello world"],
      ["assistant", ECHO_ASSISTANT, "echo: hello world"],
      ["user", SLEEP_USER, "please sleep 2s"],
      ["assistant", TOOL_MESSAGE, ""],
      ["assistant", SLEEP_ANSWER, "echo: please sleep 2s"],
    ]);
    expect(records[1]).toEqual({
      sessionId: SESSION,
      messageId: ECHO_ASSISTANT,
      role: "assistant",
      text: "echo: hello world",
      parts: [{ partId: ECHO_PART, type: "text", text: "echo: hello world" }],
      createdAt: new Date(1795305904947).toISOString(),
      completedAt: new Date(1795305905409).toISOString(),
      reason: "end_turn",
    });
    expect(records[3]?.parts).toEqual([{ partId: TOOL_PART, type: "tool", tool: "bash", status: "completed", input: SLEEP_INPUT, output: "(no output)" }]);
  });

  it("the idle boundary is a state change: without any `session.idle` event the output is identical", () => {
    const all = fixture("sse-echo-turn.txt");
    const withoutIdleEvents = all.filter((e) => e.type !== "session.idle");
    expect(withoutIdleEvents.length).toBeLessThan(all.length);
    expect(replay(withoutIdleEvents).log).toEqual(replay(all).log);
  });

  it("ignores events of other agent sessions and server-level events", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: "ses_someoneelse" });
    const { log, records } = replay(fixture("sse-echo-turn.txt"), translator);
    expect(log).toEqual([]);
    expect(records).toEqual([]);
  });
});

describe("EventTranslator edge cases", () => {
  const echo = fixture("sse-echo-turn.txt");
  const firstIdle = echo.findIndex((e) => e.type === "session.status" && (e.properties.status as { type: string }).type === "idle");
  const lastDelta = echo.findIndex((e) => e.type === "message.part.delta" && e.properties.delta === "ld");
  const throughDeltas = echo.slice(0, lastDelta + 1);
  const idleStatus: AgentEvent = { type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "idle" } } };

  it("an idle status with a message still open (aborted turn) finalizes it with the text so far, then the transition", () => {
    const { log } = replay([...throughDeltas, idleStatus]);
    expect(log.slice(-2)).toEqual([{ type: "message.finalize", messageId: ECHO_ASSISTANT, text: "echo: hello world", reason: "end_turn" }, { transition: "idle" }]);
  });

  it("late updates of a finalized message change nothing", () => {
    const { translator } = replay(echo.slice(0, firstIdle + 1));
    const late = echo.filter((e) => e.type === "message.updated" && (e.properties.info as { id: string }).id === ECHO_ASSISTANT);
    for (const e of late) expect(translator.apply(e)).toEqual({ client: [], finalized: [], transition: null, gaps: false, outcome: null, retry: null, permissionsAsked: [], permissionsReplied: [] });
  });

  it("reasoning deltas are not sent as answer text", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    replay(echo.slice(0, echo.findIndex((e) => e.type === "message.part.delta")), translator);
    translator.apply({ type: "message.part.updated", properties: { sessionID: AGENT_SESSION, part: { id: "prt_r", messageID: ECHO_ASSISTANT, sessionID: AGENT_SESSION, type: "reasoning", text: "" } } });
    const t = translator.apply({ type: "message.part.delta", properties: { sessionID: AGENT_SESSION, messageID: ECHO_ASSISTANT, partID: "prt_r", field: "text", delta: "thinking" } });
    expect(t.client).toEqual([]);
  });

  it("a full part text after missed deltas sends the missing suffix only", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    // Keep the first delta, lose the other three (a reconnect gap).
    const firstDelta = echo.findIndex((e) => e.type === "message.part.delta");
    const { log } = replay([...echo.slice(0, firstDelta + 1), ...echo.slice(lastDelta + 1, firstIdle + 1)], translator);
    const sent = log.filter((m): m is RelayClientMessage & { delta: string } => "type" in m && m.type === "message.part.text-delta").map((m) => m.delta);
    expect(sent).toEqual(["echo:", " hello world"]);
    expect(log).toContainEqual({ type: "message.finalize", messageId: ECHO_ASSISTANT, text: "echo: hello world", reason: "end_turn" });
  });
});

/** The agent's stored messages, as `GET /session/{id}/message` lists them. */
function stored(id: string, role: "user" | "assistant", text: string, created: number, completed?: number): AgentMessage {
  return {
    info: { id, role, time: { created, ...(completed !== undefined ? { completed } : {}) } },
    parts: [{ id: `prt_${id}`, type: "text", text }],
  };
}

describe("EventTranslator.reconnected (catch-up)", () => {
  const history = [
    stored("msg_u1", "user", "first", 1000),
    stored("msg_a1", "assistant", "echo: first", 1100, 1200),
    stored("msg_u2", "user", "second", 2000),
    stored("msg_a2", "assistant", "echo: second", 2100, 2200),
  ];

  it("a takeover on an idle agent records every stored message, re-announces only the newest turn, no transition", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const t = translator.reconnected({ busy: false, messages: history });
    expect(t.transition).toBeNull();
    expect(t.finalized.map((r) => [r.messageId, r.role, r.text])).toEqual([
      ["msg_u1", "user", "first"],
      ["msg_a1", "assistant", "echo: first"],
      ["msg_u2", "user", "second"],
      ["msg_a2", "assistant", "echo: second"],
    ]);
    expect(t.client).toEqual([
      { type: "message.create", messageId: "msg_a2", role: "assistant" },
      delta("msg_a2", "prt_msg_a2", "echo: second"),
      { type: "message.finalize", messageId: "msg_a2", text: "echo: second", reason: "end_turn" },
    ]);
    // Idempotent: a second catch-up has nothing new.
    expect(translator.reconnected({ busy: false, messages: history })).toEqual({ client: [], finalized: [], transition: null, gaps: false, outcome: null, retry: null, permissionsAsked: [], permissionsReplied: [] });
  });

  it("a claim's catch-up records only what the stored transcript lacks or holds otherwise, not the whole history again", () => {
    const records = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION }).reconnected({ busy: false, messages: history }).finalized;
    expect(records).toHaveLength(4);
    // As read back from the table: maps in another order, user messages with their author, and
    // a creation time of msg_u2's first sending (OpenCode gave it a newer one since).
    const reordered = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).reverse()) as T;
    const asStored = records.map((r) => reordered({ ...r, parts: r.parts.map(reordered), ...(r.role === "user" ? { authorId: "user-1" } : {}) }));
    const [u1, a1, u2] = asStored as [TranscriptMessage, TranscriptMessage, TranscriptMessage];
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    // msg_a1 was stored before its last text arrived; msg_a2 was never stored.
    translator.knowStored([u1, { ...a1, text: "echo: fi", parts: [{ ...a1.parts[0], partId: "prt_msg_a1", type: "text", text: "echo: fi" }] }, { ...u2, createdAt: new Date(1500).toISOString(), completedAt: new Date(1500).toISOString() }]);
    const t = translator.reconnected({ busy: false, messages: history });
    expect(t.finalized.map((r) => [r.messageId, r.text])).toEqual([
      ["msg_a1", "echo: first"],
      ["msg_a2", "echo: second"],
    ]);
    // msg_u2 is unchanged although OpenCode's creation time moved: the first stored one is its time.
  });

  it("a takeover mid-turn announces the open message with its text so far and reports busy; later deltas continue it", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const t = translator.reconnected({ busy: true, messages: [...history.slice(0, 3), stored("msg_a2", "assistant", "echo: se", 2100)] });
    expect(t.transition).toBe("busy");
    expect(t.client).toEqual([{ type: "message.create", messageId: "msg_a2", role: "assistant" }, delta("msg_a2", "prt_msg_a2", "echo: se")]);
    expect(t.finalized.map((r) => r.messageId)).toEqual(["msg_u1", "msg_a1", "msg_u2"]);
    const next = translator.apply({ type: "message.part.delta", properties: { sessionID: AGENT_SESSION, messageID: "msg_a2", partID: "prt_msg_a2", field: "text", delta: "cond" } });
    expect(next.client).toEqual([delta("msg_a2", "prt_msg_a2", "cond")]);
    const done = translator.apply(idle());
    expect(done.client).toEqual([{ type: "message.finalize", messageId: "msg_a2", text: "echo: second", reason: "end_turn" }]);
    expect(done.transition).toBe("idle");
  });

  it("a user message sent again under its own id (an empty answer asked for again) keeps its first creation time: one transcript item", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const user = (created: number): AgentEvent => ({ type: "message.updated", properties: { info: { id: "msg_u9", sessionID: AGENT_SESSION, role: "user", time: { created } } } });
    const part: AgentEvent = { type: "message.part.updated", properties: { part: { id: "prt_u9", messageID: "msg_u9", sessionID: AGENT_SESSION, type: "text", text: "again" } } };
    const first = [translator.apply(part), translator.apply(user(1000))].flatMap((t) => t.finalized);
    expect(first.map((r) => [r.messageId, r.createdAt])).toEqual([["msg_u9", new Date(1000).toISOString()]]);
    const again = [translator.apply(user(9000)), translator.apply(part)].flatMap((t) => t.finalized);
    expect(again).toEqual([]);
  });

  it("an answer an early idle cut short is reopened by its content: clients and the transcript get its full text", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const status = (type: string): AgentEvent => ({ type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type } } });
    const info = (completed?: number): AgentEvent => ({
      type: "message.updated",
      properties: { info: { id: "msg_a9", sessionID: AGENT_SESSION, role: "assistant", time: { created: 3000, ...(completed ? { completed } : {}) } } },
    });
    const textDelta = (d: string): AgentEvent => ({ type: "message.part.delta", properties: { sessionID: AGENT_SESSION, messageID: "msg_a9", partID: "prt_a9", field: "text", delta: d } });
    translator.apply(status("busy"));
    expect(translator.apply(info()).client).toEqual([{ type: "message.create", messageId: "msg_a9", role: "assistant" }]);
    // OpenCode says idle before the answer streamed: the open message ends empty.
    const early = translator.apply(status("idle"));
    expect(early.client).toEqual([{ type: "message.finalize", messageId: "msg_a9", text: "", reason: "end_turn" }]);
    expect(early.transition).toBe("idle");
    // Its answer comes after all.
    const resumed = translator.apply(textDelta("echo: "));
    expect(resumed.client).toEqual([{ type: "message.create", messageId: "msg_a9", role: "assistant" }, delta("msg_a9", "prt_a9", "echo: ")]);
    // The turn stays over: its prompt completed at the idle boundary; a prompt sent since is not this message's.
    expect(resumed.transition).toBeNull();
    expect(translator.apply(textDelta("late")).client).toEqual([delta("msg_a9", "prt_a9", "late")]);
    const done = translator.apply(info(3500));
    expect(done.client).toEqual([{ type: "message.finalize", messageId: "msg_a9", text: "echo: late", reason: "end_turn" }]);
    expect(done.finalized.map((r) => r.text)).toEqual(["echo: late"]);
    expect(done.transition).toBeNull();
    // A completed message is not reopened by a late update.
    expect(translator.apply(textDelta("!")).client).toEqual([]);
  });

  it("an answer completed before its content arrived (seen under load after a mid-turn agent tool) is held open: one finalize, with the text", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const info = (completed?: number): AgentEvent => ({
      type: "message.updated",
      properties: { info: { id: "msg_b9", sessionID: AGENT_SESSION, role: "assistant", time: { created: 3000, ...(completed ? { completed } : {}) } } },
    });
    const part = (text: string): AgentEvent => ({ type: "message.part.updated", properties: { part: { id: "prt_b9", messageID: "msg_b9", sessionID: AGENT_SESSION, type: "text", text } } });
    translator.apply({ type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "busy" } } });
    // The recorded order: its first `message.updated` already completed, then its (empty) text part, the deltas, the full part.
    const early = translator.apply(info(3100));
    expect(early.client).toEqual([{ type: "message.create", messageId: "msg_b9", role: "assistant" }]);
    expect(early.finalized).toEqual([]);
    expect(translator.apply(part("")).client).toEqual([]);
    expect(translator.apply({ type: "message.part.delta", properties: { sessionID: AGENT_SESSION, messageID: "msg_b9", partID: "prt_b9", field: "text", delta: "echo: " } }).client).toEqual([delta("msg_b9", "prt_b9", "echo: ")]);
    expect(translator.apply(part("echo: late")).client).toEqual([delta("msg_b9", "prt_b9", "late")]);
    const done = translator.apply(info(3100));
    expect(done.client).toEqual([{ type: "message.finalize", messageId: "msg_b9", text: "echo: late", reason: "end_turn" }]);
    expect(done.finalized.map((r) => r.text)).toEqual(["echo: late"]);
    expect(translator.apply(idle()).client).toEqual([]);
  });

  it("an answer completed with no content is finalized empty at the idle boundary, and text that still comes reopens it", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    translator.apply({ type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "busy" } } });
    const held = translator.apply({ type: "message.updated", properties: { info: { id: "msg_b9", sessionID: AGENT_SESSION, role: "assistant", time: { created: 3000, completed: 3100 } } } });
    expect(held.client).toEqual([{ type: "message.create", messageId: "msg_b9", role: "assistant" }]);
    const ended = translator.apply(idle());
    expect(ended.client).toEqual([{ type: "message.finalize", messageId: "msg_b9", text: "", reason: "end_turn" }]);
    expect(ended.transition).toBe("idle");
    const late = translator.apply({ type: "message.part.updated", properties: { part: { id: "prt_b9", messageID: "msg_b9", sessionID: AGENT_SESSION, type: "text", text: "echo: late" } } });
    expect(late.client).toEqual([
      { type: "message.create", messageId: "msg_b9", role: "assistant" },
      delta("msg_b9", "prt_b9", "echo: late"),
      { type: "message.finalize", messageId: "msg_b9", text: "echo: late", reason: "end_turn" },
    ]);
    expect(late.finalized.map((r) => r.text)).toEqual(["echo: late"]);
    expect(late.transition).toBeNull();
  });

  it("openFrames: what a client joining now has not seen of the open message (its text so far), changing nothing; none once the turn ended", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    translator.reconnected({ busy: true, messages: [...history.slice(0, 3), stored("msg_a2", "assistant", "echo: se", 2100)] });
    translator.apply({ type: "message.part.delta", properties: { sessionID: AGENT_SESSION, messageID: "msg_a2", partID: "prt_msg_a2", field: "text", delta: "co" } });
    const frames = [{ type: "message.create", messageId: "msg_a2", role: "assistant" }, delta("msg_a2", "prt_msg_a2", "echo: seco")];
    expect(translator.openFrames()).toEqual(frames);
    expect(translator.openFrames()).toEqual(frames);
    const next = translator.apply({ type: "message.part.delta", properties: { sessionID: AGENT_SESSION, messageID: "msg_a2", partID: "prt_msg_a2", field: "text", delta: "nd" } });
    expect(next.client).toEqual([delta("msg_a2", "prt_msg_a2", "nd")]);
    translator.apply(idle());
    expect(translator.openFrames()).toEqual([]);
  });

  it("a reconnect after the turn ended unseen: the missing text, the finalize, and the idle transition", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    translator.reconnected({ busy: true, messages: [...history.slice(0, 3), stored("msg_a2", "assistant", "echo: se", 2100)] });
    const t = translator.reconnected({ busy: false, messages: history });
    expect(t.client).toEqual([delta("msg_a2", "prt_msg_a2", "cond"), { type: "message.finalize", messageId: "msg_a2", text: "echo: second", reason: "end_turn" }]);
    expect(t.finalized.map((r) => [r.messageId, r.text, r.completedAt])).toEqual([["msg_a2", "echo: second", new Date(2200).toISOString()]]);
    expect(t.transition).toBe("idle");
  });

  function idle(): AgentEvent {
    return { type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "idle" } } };
  }
});

/** OpenCode 1.18.33's events for a failed turn, as the development model's `fail 401` produces them (trimmed). */
function failedTurn(error: Record<string, unknown>): AgentEvent[] {
  const sessionID = AGENT_SESSION;
  const info = { id: "msg_fail", sessionID, role: "assistant", providerID: "dev", modelID: "echo", time: { created: 1000 } };
  return [
    { type: "session.status", properties: { sessionID, status: { type: "busy" } } },
    { type: "message.updated", properties: { sessionID, info } },
    { type: "session.error", properties: { sessionID, error } },
    { type: "session.status", properties: { sessionID, status: { type: "idle" } } },
    { type: "message.updated", properties: { sessionID, info: { ...info, time: { created: 1000, completed: 1500 }, error } } },
  ];
}

const API_401 = {
  name: "APIError",
  data: {
    message: "Incorrect API key provided: sk-live-abcdefghijklmnop1234. You can find your API key in your account settings.",
    statusCode: 401,
    isRetryable: false,
    responseHeaders: { "x-request-id": "req_1" },
    metadata: { url: "http://127.0.0.1:9/v1/chat/completions" },
  },
};

describe("EventTranslator: agent errors, tool results, permissions (issue 25)", () => {
  it("a failed model call: an error frame, the message finalized with reason error and the redacted error, an error outcome", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const steps = failedTurn(API_401).map((e) => translator.apply(e));
    const client = steps.flatMap((t) => t.client);
    const error = client.find((m) => m.type === "error");
    expect(error).toMatchObject({ type: "error", code: "agent_error", error: { code: "auth" } });
    const finalize = client.find((m) => m.type === "message.finalize");
    expect(finalize).toMatchObject({ messageId: "msg_fail", text: "", reason: "error", error: { code: "auth" } });
    // Never the provider's URL, headers or a key-shaped string.
    expect(JSON.stringify(client)).not.toMatch(/127\.0\.0\.1|x-request-id|sk-live-abcdefghijklmnop1234/);
    const idle = steps.find((t) => t.transition === "idle");
    expect(idle?.outcome).toMatchObject({ reason: "error", error: { code: "auth" }, model: "dev/echo" });
    expect(steps.flatMap((t) => t.finalized).find((r) => r.messageId === "msg_fail")).toMatchObject({ reason: "error", error: { code: "auth" } });
    // One error frame per turn; the late message update changes nothing.
    expect(client.filter((m) => m.type === "error")).toHaveLength(1);
  });

  it("classifies billing (402) and rate limits (429 or OpenCode's retry status); a cancel is canceled with no error frame", () => {
    const billing = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const b = failedTurn({ name: "APIError", data: { message: "You exceeded your current quota, please check your plan and billing details.", statusCode: 402, isRetryable: false } }).map((e) => billing.apply(e));
    expect(b.find((t) => t.outcome)?.outcome?.error?.code).toBe("billing");

    const limited = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    limited.apply({ type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "busy" } } });
    const retry = limited.apply({ type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "retry", attempt: 1, message: "Rate limit reached for requests. Please try again later.", next: 5 } } });
    expect(retry.retry).toMatchObject({ code: "rate_limit" });
    expect(retry.client).toEqual([]);

    const canceled = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const c = failedTurn({ name: "MessageAbortedError", data: { message: "The operation was aborted." } }).map((e) => canceled.apply(e));
    const client = c.flatMap((t) => t.client);
    expect(client.some((m) => m.type === "error")).toBe(false);
    expect(client.find((m) => m.type === "message.finalize")).toMatchObject({ reason: "canceled", error: { code: "canceled" } });
    expect(c.find((t) => t.outcome)?.outcome?.reason).toBe("canceled");
  });

  it("tool updates carry the call's input and its bounded, redacted output or error", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const part = (state: Record<string, unknown>) => ({
      type: "message.part.updated",
      properties: { sessionID: AGENT_SESSION, part: { id: "prt_t", messageID: "msg_t", sessionID: AGENT_SESSION, type: "tool", tool: "bash", state } },
    });
    translator.apply({ type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "busy" } } });
    const input = { command: "export API_KEY=abcdef0123456789 && make", description: "build" };
    const out = [
      ...translator.apply(part({ status: "pending", input: {}, raw: "" })).client,
      ...translator.apply(part({ status: "running", input })).client,
      ...translator.apply(part({ status: "completed", input, output: "x".repeat(5_000), title: "make" })).client,
    ];
    expect(out.map((m) => m.type)).toEqual(["message.create", "message.part.tool-update", "message.part.tool-update", "message.part.tool-update"]);
    const done = out.at(-1) as unknown as { input: { command: string }; output: string };
    expect(done.input.command).toContain("make");
    expect(done.input.command).not.toContain("abcdef0123456789");
    expect(done.output.length).toBeLessThan(2_100);
    expect(done.output).toMatch(/more characters\]$/);
    const failed = translator.apply(part({ status: "error", input, error: "exit status 2" })).client[0];
    expect(failed).toMatchObject({ status: "error", error: "exit status 2" });
  });

  it("hands permission.asked and permission.replied to the relay", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    const asked = translator.apply({
      type: "permission.asked",
      properties: {
        id: "per_1",
        sessionID: AGENT_SESSION,
        permission: "external_directory",
        patterns: ["/etc/*"],
        metadata: { filepath: "/etc/hostname" },
        always: ["/etc/*"],
        tool: { messageID: "msg_t", callID: "call_1" },
      },
    });
    expect(asked.permissionsAsked).toEqual([
      { permissionId: "per_1", permission: "external_directory", patterns: ["/etc/*"], always: ["/etc/*"], metadata: { filepath: "/etc/hostname" }, tool: { messageId: "msg_t", callId: "call_1" } },
    ]);
    const replied = translator.apply({ type: "permission.replied", properties: { sessionID: AGENT_SESSION, requestID: "per_1", reply: "once" } });
    expect(replied.permissionsReplied).toEqual([{ permissionId: "per_1", response: "once" }]);
    const other = translator.apply({ type: "permission.asked", properties: { id: "per_2", sessionID: "ses_other", permission: "bash", patterns: [], metadata: {}, always: [] } });
    expect(other.permissionsAsked).toEqual([]);
  });
});
