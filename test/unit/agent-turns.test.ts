/**
 * The relay's turn decisions (functions/relay/agent-turns.ts) with in-memory stores and the
 * scripted agent: the next model of a failover chain, when a failed turn fails its prompt and
 * when it goes again on the next model, the permission policy, and authors on user messages.
 */
import { describe, expect, it } from "vitest";
import { createLogger } from "../../functions/observability/logger";
import type { PromptQueue, QueuedPrompt } from "../../functions/ports/session-items";
import type { TranscriptMessage } from "../../functions/ports/transcript";
import { MAX_RESENDS_AFTER_ABORT, nextModel, onPendingPermissions, onPermissionsAsked, onRetry, resendInterrupted, settleFailedTurn, withAuthors, type AgentTurnDeps, type TurnWatch } from "../../functions/relay/agent-turns";
import type { PermissionAsk, TurnOutcome } from "../../functions/relay/event-translator";
import { buildSession } from "../support/builders";
import { ScriptedAgent } from "../support/scripted-agent";

function harness(session = buildSession({ status: "running", fallbackModels: ["dev/echo-backup", "openai/gpt-4o"] })) {
  const prompts: QueuedPrompt[] = [];
  const queue: PromptQueue = {
    enqueue: () => Promise.reject(new Error("not used")),
    enqueueOnce: () => Promise.reject(new Error("not used")),
    getKeyed: () => Promise.reject(new Error("not used")),
    list: (_id, status) => Promise.resolve(prompts.filter((p) => !status || p.status === status)),
    listOpen: () => Promise.resolve(prompts.filter((p) => p.status === "queued" || p.status === "processing")),
    move: () => Promise.resolve(true),
  };
  const notes: TranscriptMessage[] = [];
  const agent = new ScriptedAgent();
  const deps: AgentTurnDeps = {
    sessions: { getSession: () => Promise.resolve(session) },
    prompts: queue,
    agent,
    transcript: { upsert: (m) => Promise.resolve(void notes.push(m)), list: () => Promise.reject(new Error("not used")) },
    logger: createLogger("agent-turns-test"),
    now: () => new Date("2026-01-01T00:00:00Z"),
  };
  const watch: TurnWatch = { sessionId: session.id, endpoint: { url: "http://agent.invalid", authorization: null }, agentSessionId: "ses_agent", asked: new Set(), failover: null, resentAfterAbort: null, answeredAgain: null, pendingAnswer: null };
  const sent: Record<string, unknown>[] = [];
  const send = (m: Record<string, unknown>) => Promise.resolve(void sent.push(m));
  const prompt = (content: string, status: QueuedPrompt["status"], source = "user:alice"): QueuedPrompt => {
    const p: QueuedPrompt = { promptId: `prm_${prompts.length}`, sessionId: session.id, content, status, source, createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-01T00:00:00.000Z" };
    prompts.push(p);
    return p;
  };
  return { deps, watch, agent, notes, sent, send, prompt, session };
}

const error = (code: "rate_limit" | "auth" | "billing" | "context_overflow") => ({ code, message: `${code} happened` });
const outcome = (o: Partial<TurnOutcome>): TurnOutcome => ({ reason: "error", error: null, model: "dev/echo", empty: false, ...o });

describe("nextModel", () => {
  it("the session's own model (not in the chain) goes to the first fallback, each fallback to the one after it, the last to none", () => {
    const s = { fallbackModels: ["a/1", "b/2"] };
    expect(nextModel(s, "dev/echo")).toBe("a/1");
    expect(nextModel(s, null)).toBe("a/1");
    expect(nextModel(s, "a/1")).toBe("b/2");
    expect(nextModel(s, "b/2")).toBeNull();
    expect(nextModel({ fallbackModels: [] }, "dev/echo")).toBeNull();
  });
});

describe("settleFailedTurn", () => {
  it("an auth failure with a next model: the prompt goes again on it, clients and the transcript are told, no failure", async () => {
    const h = harness();
    h.prompt("fix it", "processing");
    const failure = await settleFailedTurn(h.deps, h.watch, outcome({ error: error("auth") }), h.send);
    expect(failure).toBeNull();
    expect(h.agent.prompts.map((p) => p.text)).toEqual(["fix it"]);
    expect(h.sent).toEqual([{ type: "agent.failover", promptId: "prm_0", from: "dev/echo", to: "dev/echo-backup", reason: "auth", message: "auth happened" }]);
    expect(h.notes[0]).toMatchObject({ role: "system", reason: "error", error: { code: "auth" } });
  });

  it("no failover for other errors, for the last model of the chain, or with no prompt processing", async () => {
    const h = harness();
    h.prompt("fix it", "processing");
    expect(await settleFailedTurn(h.deps, h.watch, outcome({ error: error("context_overflow") }), h.send)).toEqual({ reason: "error", code: "context_overflow", message: "context_overflow happened" });
    expect(await settleFailedTurn(h.deps, h.watch, outcome({ error: error("billing"), model: "openai/gpt-4o" }), h.send)).toMatchObject({ code: "billing" });
    expect(await settleFailedTurn(h.deps, h.watch, outcome({ reason: "canceled", error: { code: "canceled", message: "aborted" } }), h.send)).toMatchObject({ reason: "canceled" });
    expect(h.agent.prompts).toEqual([]);
    const empty = harness();
    expect(await settleFailedTurn(empty.deps, empty.watch, outcome({ error: error("auth") }), empty.send)).toMatchObject({ code: "auth" });
  });

  it("a rate limit OpenCode retries: aborted once for the next model, then sent again on it when the turn ends; a cut-short resend goes again, up to MAX_RESENDS_AFTER_ABORT times", async () => {
    const h = harness();
    h.prompt("fix it", "processing");
    expect(await onRetry(h.deps, h.watch, error("rate_limit"), "dev/echo")).toMatchObject({ code: "rate_limit" });
    expect(await onRetry(h.deps, h.watch, error("rate_limit"), "dev/echo")).toBeNull();
    expect(h.agent.aborts).toEqual(["ses_agent"]);
    // The abort ends the turn (OpenCode: with no error); the planned failover still applies.
    expect(await settleFailedTurn(h.deps, h.watch, outcome({ error: error("rate_limit") }), h.send)).toBeNull();
    expect(h.agent.prompts.map((p) => p.text)).toEqual(["fix it"]);
    for (let i = 1; i <= MAX_RESENDS_AFTER_ABORT; i++) {
      expect(await resendInterrupted(h.deps, h.watch, outcome({ reason: "end_turn", empty: true })), `resend ${i}`).toBe(true);
      expect(h.agent.prompts).toHaveLength(1 + i);
    }
    // No more than that.
    expect(await resendInterrupted(h.deps, h.watch, outcome({ reason: "end_turn", empty: true }))).toBe(false);
    expect(h.agent.prompts).toHaveLength(1 + MAX_RESENDS_AFTER_ABORT);
  });

  it("a failover turn that said something is never sent again", async () => {
    const h = harness();
    h.prompt("fix it", "processing");
    await onRetry(h.deps, h.watch, error("rate_limit"), "dev/echo");
    expect(await settleFailedTurn(h.deps, h.watch, outcome({ error: error("rate_limit") }), h.send)).toBeNull();
    expect(await resendInterrupted(h.deps, h.watch, outcome({ reason: "end_turn", empty: false }))).toBe(false);
    expect(h.agent.prompts).toHaveLength(1);
  });

  it("no abort without a next model, nor for errors failover does not cover", async () => {
    const h = harness(buildSession({ status: "running", fallbackModels: [] }));
    expect(await onRetry(h.deps, h.watch, error("rate_limit"), "dev/echo")).toBeNull();
    const g = harness();
    expect(await onRetry(g.deps, g.watch, { code: "provider_error", message: "overloaded" }, "dev/echo")).toBeNull();
    expect([...h.agent.aborts, ...g.agent.aborts]).toEqual([]);
  });
});

describe("permissions and authors", () => {
  const ask: PermissionAsk = { permissionId: "per_1", permission: "bash", patterns: ["rm *"], always: ["rm *"], metadata: {}, tool: null };

  it("policy auto answers once and tells no client; policy ask tells the clients and answers nothing", async () => {
    const auto = harness();
    await onPermissionsAsked(auto.deps, auto.watch, [ask], auto.send);
    expect(auto.agent.permissionReplies).toEqual([{ permissionId: "per_1", response: "once" }]);
    expect(auto.sent).toEqual([]);
    const asking = harness(buildSession({ status: "running", permissionPolicy: "ask" }));
    await onPermissionsAsked(asking.deps, asking.watch, [ask], asking.send);
    expect(asking.agent.permissionReplies).toEqual([]);
    expect(asking.sent).toEqual([{ type: "permission.asked", ...ask }]);
  });

  it("user messages get the author of the prompt with their text that reached the agent", async () => {
    const h = harness();
    h.prompt("same words", "completed", "user:alice");
    h.prompt("same words", "processing", "user:bob");
    h.prompt("same words", "queued", "user:carol");
    const record = (text: string, role: "user" | "assistant" = "user"): TranscriptMessage => ({ sessionId: "s", messageId: `m_${text}`, role, text, parts: [], createdAt: "2026-01-01T00:00:00.000Z", completedAt: null });
    const out = await withAuthors(h.deps, h.session.id, [record("same words"), record("other"), record("same words", "assistant")]);
    expect(out.map((r) => r.authorId)).toEqual(["bob", undefined, undefined]);
  });

  it("a turn's user message is matched from the open prompts; the session's history is read only for one they do not match", async () => {
    const h = harness();
    h.prompt("old words", "completed", "user:alice");
    h.prompt("new words", "processing", "user:bob");
    const reads: string[] = [];
    const { list, listOpen } = h.deps.prompts;
    h.deps.prompts = { ...h.deps.prompts, list: (id, status) => (reads.push("list"), list(id, status)), listOpen: (id) => (reads.push("listOpen"), listOpen(id)) };
    const record = (text: string): TranscriptMessage => ({ sessionId: "s", messageId: `m_${text}`, role: "user", text, parts: [], createdAt: "2026-01-01T00:00:00.000Z", completedAt: null });
    expect((await withAuthors(h.deps, h.session.id, [record("new words")])).map((r) => r.authorId)).toEqual(["bob"]);
    expect(reads).toEqual(["listOpen"]);
    // A claim's catch-up: an earlier turn's message too.
    expect((await withAuthors(h.deps, h.session.id, [record("old words"), record("new words")])).map((r) => r.authorId)).toEqual(["alice", "bob"]);
    expect(reads).toEqual(["listOpen", "listOpen", "list"]);
  });
});

describe("onPendingPermissions (a relay takeover, a reconnect)", () => {
  const pending = (id: string) => ({ id, sessionID: "ses_agent", permission: "external_directory", patterns: ["/etc/*"], always: ["/etc/*"], metadata: { filepath: "/etc/hostname" }, tool: { messageID: "msg_1", callID: "call_1" } });

  it("policy ask: questions not yet put by this watch are sent as the live frames are, each once", async () => {
    const h = harness(buildSession({ status: "running", permissionPolicy: "ask" }));
    h.agent.pending.set("ses_agent", [pending("per_a"), pending("per_b")]);
    h.watch.asked.add("per_a");
    await onPendingPermissions(h.deps, h.watch, h.send);
    expect(h.sent).toEqual([
      { type: "permission.asked", permissionId: "per_b", permission: "external_directory", patterns: ["/etc/*"], always: ["/etc/*"], metadata: { filepath: "/etc/hostname" }, tool: { messageId: "msg_1", callId: "call_1" } },
    ]);
    await onPendingPermissions(h.deps, h.watch, h.send);
    expect(h.sent).toHaveLength(1);
    expect(h.agent.permissionReplies).toEqual([]);
  });

  it("policy auto: a question the previous relay never answered is approved", async () => {
    const h = harness(buildSession({ status: "running", permissionPolicy: "auto" }));
    h.agent.pending.set("ses_agent", [pending("per_a")]);
    await onPendingPermissions(h.deps, h.watch, h.send);
    expect(h.agent.permissionReplies).toEqual([{ permissionId: "per_a", response: "once" }]);
    expect(h.sent).toEqual([]);
  });

  it("an agent that cannot be asked changes nothing (the next reconnect lists again)", async () => {
    const h = harness(buildSession({ status: "running", permissionPolicy: "ask" }));
    h.agent.pendingPermissions = () => Promise.reject(new Error("connection refused"));
    await onPendingPermissions(h.deps, h.watch, h.send);
    expect(h.sent).toEqual([]);
  });
});
