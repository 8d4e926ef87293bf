/**
 * The relay's event translator replaying recorded OpenCode SSE streams
 * (test/fixtures/opencode): the exact client message sequence, the transcript records, and one
 * busy -> idle transition per turn derived from state, not from event names (seed 002 c. 9).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../functions/ports/agent-client";
import type { AgentMessage } from "../../functions/relay/agent-messages";
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

const SLEEP_TURN = [
  { transition: "busy" },
  { type: "message.create", messageId: TOOL_MESSAGE, role: "assistant" },
  { type: "message.part.tool-update", messageId: TOOL_MESSAGE, partId: TOOL_PART, tool: "bash", status: "pending" },
  { type: "message.part.tool-update", messageId: TOOL_MESSAGE, partId: TOOL_PART, tool: "bash", status: "running" },
  { type: "message.part.tool-update", messageId: TOOL_MESSAGE, partId: TOOL_PART, tool: "bash", status: "completed", title: "sleep 2" },
  { type: "message.finalize", messageId: TOOL_MESSAGE, text: "" },
  { type: "message.create", messageId: SLEEP_ANSWER, role: "assistant" },
  delta(SLEEP_ANSWER, SLEEP_PART, "echo: "),
  delta(SLEEP_ANSWER, SLEEP_PART, "please"),
  delta(SLEEP_ANSWER, SLEEP_PART, " sleep"),
  delta(SLEEP_ANSWER, SLEEP_PART, " 2s"),
  { type: "message.finalize", messageId: SLEEP_ANSWER, text: "echo: please sleep 2s" },
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
      { type: "message.finalize", messageId: ECHO_ASSISTANT, text: "echo: hello world" },
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
    });
    expect(records[3]?.parts).toEqual([{ partId: TOOL_PART, type: "tool", tool: "bash", status: "completed" }]);
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
    expect(log.slice(-2)).toEqual([{ type: "message.finalize", messageId: ECHO_ASSISTANT, text: "echo: hello world" }, { transition: "idle" }]);
  });

  it("late updates of a finalized message change nothing", () => {
    const { translator } = replay(echo.slice(0, firstIdle + 1));
    const late = echo.filter((e) => e.type === "message.updated" && (e.properties.info as { id: string }).id === ECHO_ASSISTANT);
    for (const e of late) expect(translator.apply(e)).toEqual({ client: [], finalized: [], transition: null, gaps: false });
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
    expect(log).toContainEqual({ type: "message.finalize", messageId: ECHO_ASSISTANT, text: "echo: hello world" });
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
      { type: "message.finalize", messageId: "msg_a2", text: "echo: second" },
    ]);
    // Idempotent: a second catch-up has nothing new.
    expect(translator.reconnected({ busy: false, messages: history })).toEqual({ client: [], finalized: [], transition: null, gaps: false });
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
    expect(done.client).toEqual([{ type: "message.finalize", messageId: "msg_a2", text: "echo: second" }]);
    expect(done.transition).toBe("idle");
  });

  it("a reconnect after the turn ended unseen: the missing text, the finalize, and the idle transition", () => {
    const translator = new EventTranslator({ sessionId: SESSION, agentSessionId: AGENT_SESSION });
    translator.reconnected({ busy: true, messages: [...history.slice(0, 3), stored("msg_a2", "assistant", "echo: se", 2100)] });
    const t = translator.reconnected({ busy: false, messages: history });
    expect(t.client).toEqual([delta("msg_a2", "prt_msg_a2", "cond"), { type: "message.finalize", messageId: "msg_a2", text: "echo: second" }]);
    expect(t.finalized.map((r) => [r.messageId, r.text, r.completedAt])).toEqual([["msg_a2", "echo: second", new Date(2200).toISOString()]]);
    expect(t.transition).toBe("idle");
  });

  function idle(): AgentEvent {
    return { type: "session.status", properties: { sessionID: AGENT_SESSION, status: { type: "idle" } } };
  }
});
