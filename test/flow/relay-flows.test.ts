/**
 * The streaming relay with the real flows, store and prompt queue (flow harness over dynalite,
 * instant provider) and a fake OpenCode whose event stream the test drives: claim and ordered
 * fan-out, the idle boundary completing turns and dispatching the queue, takeover after a relay
 * dies (busy and idle agent) without duplicates, reopen on a new sandbox, and letting go of a
 * paused session. The clock moves through the harness; conditions are awaited with a bound.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { agentEndpoint } from "../../functions/agent/agent-endpoint";
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import type { AgentEndpoint } from "../../functions/ports/agent-client";
import type { SessionRecord } from "../../functions/domain/session";
import { submitPrompt } from "../../functions/services/submit-prompt";
import type { RelayLeaseStore } from "../../functions/ports/relay";
import { StreamingRelay, type RelayDeps } from "../../functions/relay/relay";
import { idleGraceSeconds } from "../../functions/idle/idle-predicate";
import { SqsRelayNudge } from "../../functions/adapters/aws/sqs-relay-nudge";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { FakeOpenCode } from "../support/fake-opencode";
import { startFlowHarness, TEST_MASTER_KEY, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { waitFor } from "../support/wait-for";

const TTL = 30;
let h: FlowHarness;
let agent: FakeOpenCode;
let transcript: DynamoTranscriptStore;
let relayLeases: DynamoRelayLeaseStore;
const relays: StreamingRelay[] = [];

beforeEach(async () => {
  agent = new FakeOpenCode();
  // Every sandbox's agent wants its session's password: each test below proves the relay (and the
  // flows' delivery) authenticates with it.
  agent.requireAuthorization = true;
  h = await startFlowHarness({ provider: new InstantSandboxProvider(), agent });
  transcript = new DynamoTranscriptStore(h.table.doc, h.table.tableName);
  relayLeases = new DynamoRelayLeaseStore(h.table.doc, h.table.tableName);
});
afterEach(async () => {
  for (const r of relays.splice(0)) await r.drain();
  await h.close();
});

/** The session's agent as the control plane reaches it (the instant provider's one URL). */
function endpointOf(sessionId: string): Promise<AgentEndpoint> {
  return agentEndpoint(h.deps.sandboxKeys, sessionId, "http://instant.invalid");
}

function relay(ownerId: string, leases: RelayLeaseStore = relayLeases, sandboxKeys = h.deps.sandboxKeys, ttl = TTL, overrides: Partial<RelayDeps> = {}): StreamingRelay {
  const r = new StreamingRelay(
    {
      sessions: h.deps.sessions,
      prompts: h.deps.prompts,
      flows: h.deps.flows,
      agent,
      sandboxKeys,
      agentMessages: agent,
      connections: h.deps.connections,
      push: h.push,
      transcript,
      relayLeases: leases,
      // The flows' nudges (the AWS adapter over an SQS stand-in in this harness): the tests read them with `pollNudges`.
      nudges: h.nudgeSource(),
      // A drain's handover goes to the same queue (SendMessageBatch), as in AWS.
      handover: new SqsRelayNudge(() => h.nudgeQueue.client, h.nudgeQueue.queueUrl),
      scheduler: h.deps.scheduler,
      config: h.config,
      logger: h.deps.logger,
      now: h.deps.now,
      ...overrides,
    },
    // Scans, heartbeats and nudges are driven by the tests; every message reads the connection list.
    { ownerId, leaseTtlSeconds: ttl, connectionCacheMs: 0 },
  );
  relays.push(r);
  return r;
}


async function runningSession(): Promise<SessionRecord> {
  const s = await h.createSession();
  const after = await h.run("ensure-runtime", s.id);
  expect(after.status).toBe("running");
  return after;
}

function agentSessionOf(s: SessionRecord): string {
  if (!s.codingAgentSessionId) throw new Error("running session without an agent session");
  return s.codingAgentSessionId;
}

async function holding(r: StreamingRelay, sessionId: string): Promise<void> {
  await r.scanNow();
  expect(r.heldSessions()).toEqual([sessionId]);
  await waitFor(() => r.streamCounters().open === 1, { message: "relay stream live" });
}

function streamed(connectionId: string) {
  return h.push.sent.filter((s) => s.connectionId === connectionId && s.message.type.startsWith("message.")).map((s) => s.message);
}

async function prompt(sessionId: string, content: string) {
  return submitPrompt(h.deps, await h.session(sessionId), { content, source: "user:u" });
}

async function statuses(sessionId: string) {
  return (await h.deps.prompts.list(sessionId)).map((p) => [p.content, p.status]);
}

async function transcriptOf(sessionId: string) {
  return (await transcript.list(sessionId, { limit: 100 })).items.map((m) => [m.role, m.text]);
}


/** The harness's session store and scheduler, recording every store call and every arm the relay makes, in order. */
function recordingStoreAndScheduler() {
  const calls: string[] = [];
  const sessions = new Proxy(h.deps.sessions, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  const scheduler = {
    arm: (target: { sessionId: string; purpose: string }, at: Date) => {
      calls.push(`arm ${target.purpose}`);
      return h.deps.scheduler.arm(target as never, at);
    },
    cancel: (target: { sessionId: string; purpose: string }) => h.deps.scheduler.cancel(target as never),
  };
  return { calls, sessions, scheduler };
}
describe("StreamingRelay", () => {
  it("claims a running session and fans one turn out to two clients in order; the turn is persisted and completed", async () => {
    const s = await runningSession();
    const c1 = await h.addClient(s.id);
    const c2 = await h.addClient(s.id);
    const a = relay("relay-a");
    await holding(a, s.id);

    const submitted = await prompt(s.id, "hello");
    expect(submitted.status).toBe("processing");
    await waitFor(async () => (await h.session(s.id)).agentBusy, { message: "agent busy recorded" });
    agent.finish(agentSessionOf(s));
    await waitFor(() => [c1, c2].every((c) => streamed(c).some((m) => m.type === "message.finalize")), { message: "finalize reached both clients" });

    const expected = [
      { type: "message.create", messageId: "msg_1a", role: "assistant" },
      { type: "message.part.text-delta", messageId: "msg_1a", partId: "prt_1a", delta: "echo: " },
      { type: "message.part.text-delta", messageId: "msg_1a", partId: "prt_1a", delta: "hello" },
      { type: "message.finalize", messageId: "msg_1a", text: "echo: hello", reason: "end_turn" },
    ];
    expect(streamed(c1)).toEqual(expected);
    expect(streamed(c2)).toEqual(expected);
    await waitFor(async () => (await statuses(s.id)).every(([, st]) => st === "completed"), { message: "turn completed" });
    expect(await transcriptOf(s.id)).toEqual([
      ["user", "hello"],
      ["assistant", "echo: hello"],
    ]);
    const after = await h.session(s.id);
    expect(after.agentBusy).toBe(false);
    expect(after.lastKnownAgentIdleAt).not.toBeNull();
    expect(Date.parse(after.lastActivityAt)).toBeGreaterThanOrEqual(Date.parse(s.lastActivityAt));
  });

  it("the idle boundary writes the session once and arms the idle check from that write: no session read (issue 15)", async () => {
    const s = await runningSession();
    const { calls, sessions, scheduler } = recordingStoreAndScheduler();
    const a = relay("relay-a", relayLeases, h.deps.sandboxKeys, TTL, { sessions, scheduler });
    await holding(a, s.id);
    await prompt(s.id, "hello");
    await waitFor(async () => (await h.session(s.id)).agentBusy, { message: "agent busy recorded" });
    calls.length = 0;
    const finished = h.deps.now();
    agent.finish(agentSessionOf(s));
    await waitFor(() => calls.includes("arm idle-check"), { message: "idle check armed" });
    // One UpdateItem for activity and agent state (it was touchActivity + recordAgentState), and the
    // arm computed from the item it returned (it was a GetItem).
    expect(calls).toEqual(["recordAgentIdle", "arm idle-check"]);
    const after = await h.session(s.id);
    expect(after).toMatchObject({ agentBusy: false, status: "running" });
    expect(Date.parse(after.lastActivityAt)).toBeGreaterThanOrEqual(finished.getTime());
    expect(after.lastKnownAgentIdleAt).toBe(after.lastActivityAt);
    expect((await statuses(s.id)).map(([, st]) => st)).toEqual(["completed"]);
    // Armed for the grace after that activity, as a read would have computed it.
    const idleCheck = h.scheduler.pending().find((p) => p.name.includes("idle-check"));
    expect(idleCheck?.at.getTime()).toBe(Date.parse(after.lastActivityAt) + idleGraceSeconds(after.clientType, h.config) * 1000);
  });

  it("a claim that finds the agent idle records it and arms the idle check from the item it wrote, without reading the session; its clients are read once, ahead of any frame", async () => {
    const s = await runningSession();
    const { calls, sessions, scheduler } = recordingStoreAndScheduler();
    const lists = vi.spyOn(h.deps.connections, "list");
    const a = relay("relay-a", relayLeases, h.deps.sandboxKeys, TTL, { sessions, scheduler });
    await holding(a, s.id);
    await waitFor(() => calls.includes("arm idle-check"), { message: "idle check armed" });
    // One UpdateItem (agent idle, ALL_NEW) and the arm computed from it: no getSession before the arm.
    expect(calls.slice(0, calls.indexOf("arm idle-check") + 1)).toEqual(["recordAgentState", "arm idle-check"]);
    // Nothing to send on connect, but its clients are listed now, beside the connect: a turn's first frame then waits for no Query.
    await waitFor(() => lists.mock.calls.length, { message: "the claim's connection list read" });
    expect(lists.mock.calls).toEqual([[s.id]]);
    const after = await h.session(s.id);
    expect(after.agentBusy).toBe(false);
    const idleCheck = h.scheduler.pending().find((p) => p.name.includes("idle-check"));
    // Armed for the grace after the session's activity, as a read would have computed it.
    expect(idleCheck?.at.getTime()).toBe(Date.parse(after.lastActivityAt) + idleGraceSeconds(after.clientType, h.config) * 1000);
  });

  it("the busy -> idle boundary completes the processing prompt and dispatches the next queued one, each sent once", async () => {
    const s = await runningSession();
    const a = relay("relay-a");
    await holding(a, s.id);
    await prompt(s.id, "first");
    const second = await prompt(s.id, "second");
    expect(second).toMatchObject({ status: "queued", delivery: "waiting" });
    expect(agent.prompts.map((p) => p.text)).toEqual(["first"]);

    agent.finish(agentSessionOf(s));
    await waitFor(() => agent.prompts.length === 2, { message: "second prompt sent" });
    expect(await statuses(s.id)).toEqual([
      ["first", "completed"],
      ["second", "processing"],
    ]);
    agent.finish(agentSessionOf(s));
    await waitFor(async () => (await statuses(s.id)).every(([, st]) => st === "completed"), { message: "second turn completed" });
    expect(agent.prompts.map((p) => p.text)).toEqual(["first", "second"]);
    expect(await transcriptOf(s.id)).toEqual([
      ["user", "first"],
      ["assistant", "echo: first"],
      ["user", "second"],
      ["assistant", "echo: second"],
    ]);
  });

  it("takeover of a busy turn: relay B waits for the lease TTL, then for idle, completes the turn once, no duplicates", async () => {
    const s = await runningSession();
    const client = await h.addClient(s.id);
    const a = relay("relay-a");
    await holding(a, s.id);
    await prompt(s.id, "long task");
    await waitFor(async () => (await transcriptOf(s.id)).length === 1, { message: "user message persisted by A" });
    await a.kill(); // dies mid-turn: stream gone, heartbeat and claim left behind
    expect(agent.subscriberCount()).toBe(0);

    const b = relay("relay-b");
    await b.scanNow();
    expect(b.heldSessions()).toEqual([]); // A's lease is still live
    h.advance((TTL + 1) * 1000);
    await holding(b, s.id);
    expect((await statuses(s.id))[0]).toEqual(["long task", "processing"]);

    agent.finish(agentSessionOf(s));
    await waitFor(async () => (await statuses(s.id))[0]?.[1] === "completed", { message: "turn completed by B" });
    expect(await transcriptOf(s.id)).toEqual([
      ["user", "long task"],
      ["assistant", "echo: long task"],
    ]);
    expect(agent.prompts.map((p) => p.text)).toEqual(["long task"]);
    expect(streamed(client).filter((m) => m.type === "message.finalize")).toEqual([{ type: "message.finalize", messageId: "msg_1a", text: "echo: long task", reason: "end_turn" }]);
  });

  it("takeover after the turn ended unwatched: catch-up persists it, completes it, and delivers the next queued prompt", async () => {
    const s = await runningSession();
    const a = relay("relay-a");
    await holding(a, s.id);
    await prompt(s.id, "first");
    await prompt(s.id, "second");
    await a.kill();
    agent.finish(agentSessionOf(s)); // nobody watches this idle boundary

    h.advance((TTL + 1) * 1000);
    const b = relay("relay-b");
    await holding(b, s.id);
    await waitFor(() => agent.prompts.length === 2, { message: "second prompt sent" });
    expect(await statuses(s.id)).toEqual([
      ["first", "completed"],
      ["second", "processing"],
    ]);
    agent.finish(agentSessionOf(s));
    await waitFor(async () => (await statuses(s.id)).every(([, st]) => st === "completed"), { message: "second turn completed" });
    expect(agent.prompts.map((p) => p.text)).toEqual(["first", "second"]);
    expect(await transcriptOf(s.id)).toEqual([
      ["user", "first"],
      ["assistant", "echo: first"],
      ["user", "second"],
      ["assistant", "echo: second"],
    ]);
  });

  it("takeover of a session with a history writes only what the transcript lacks, not every message again (issue 15)", async () => {
    const s = await runningSession();
    const a = relay("relay-a");
    await holding(a, s.id);
    await prompt(s.id, "first");
    await waitFor(async () => (await h.session(s.id)).agentBusy, { message: "first turn busy" });
    agent.finish(agentSessionOf(s));
    await waitFor(async () => (await statuses(s.id)).every(([, st]) => st === "completed"), { message: "first turn completed" });
    await prompt(s.id, "second");
    await waitFor(async () => (await transcriptOf(s.id)).length === 3, { message: "relay A stored the second question" });
    await a.kill();
    agent.finish(agentSessionOf(s)); // its answer: nobody watches this idle boundary

    h.advance((TTL + 1) * 1000);
    const written: [string, string][] = [];
    const counted = {
      upsert: (m: Parameters<DynamoTranscriptStore["upsert"]>[0]) => {
        written.push([m.role, m.text]);
        return transcript.upsert(m);
      },
      list: transcript.list.bind(transcript),
    };
    const b = relay("relay-b", relayLeases, h.deps.sandboxKeys, TTL, { transcript: counted });
    await holding(b, s.id);
    await waitFor(async () => (await statuses(s.id)).every(([, st]) => st === "completed"), { message: "second turn completed by relay B" });
    // Before: all four messages again (a PutItem each); now the one relay A never saw.
    expect(written).toEqual([["assistant", "echo: second"]]);
    expect(await transcriptOf(s.id)).toEqual([
      ["user", "first"],
      ["assistant", "echo: first"],
      ["user", "second"],
      ["assistant", "echo: second"],
    ]);
  });

  it("takeover while a prompt is on its way to an idle agent: the relay waits for its turn instead of completing it", async () => {
    const s = await runningSession();
    // A deliverer moved the prompt to processing and has not called the agent yet.
    const inFlight = await h.deps.prompts.enqueue({ sessionId: s.id, content: "in flight", source: "user:u", now: h.deps.now() });
    expect(await h.deps.prompts.move(inFlight, "queued", "processing", h.deps.now())).toBe(true);
    await h.deps.prompts.enqueue({ sessionId: s.id, content: "behind it", source: "user:u", now: h.deps.now() });
    const b = relay("relay-b");
    await holding(b, s.id);
    expect(await statuses(s.id)).toEqual([
      ["in flight", "processing"],
      ["behind it", "queued"],
    ]);
    expect(agent.prompts).toEqual([]);

    await agent.promptAsync(await endpointOf(s.id), agentSessionOf(s), "in flight");
    agent.finish(agentSessionOf(s));
    await waitFor(() => agent.prompts.length === 2, { message: "next prompt sent after the turn" });
    expect(agent.prompts.map((p) => p.text)).toEqual(["in flight", "behind it"]);
  });

  it("a prompt stranded in processing (its sender died before sending) goes back to the queue and is sent exactly once", async () => {
    const s = await runningSession();
    const b = relay("relay-b", relayLeases, h.deps.sandboxKeys, 3600);
    await holding(b, s.id);
    const stranded = await h.deps.prompts.enqueue({ sessionId: s.id, content: "lost on the way", source: "user:u", now: h.deps.now() });
    expect(await h.deps.prompts.move(stranded, "queued", "processing", h.deps.now())).toBe(true);
    // Within the grace nothing happens: it may still be on its way.
    await b.look(s.id);
    expect(agent.prompts).toEqual([]);
    h.advance(61_000);
    // A nudge makes the relay check (the prompt path nudges when it finds a stale processing
    // prompt; no relay polls for it).
    await b.look(s.id);
    await waitFor(() => agent.prompts.length === 1, { message: "the stranded prompt sent" });
    expect(agent.prompts.map((p) => p.text)).toEqual(["lost on the way"]);
    expect(await statuses(s.id)).toEqual([["lost on the way", "processing"]]);
    agent.finish(agentSessionOf(s));
    await waitFor(async () => (await statuses(s.id))[0]?.[1] === "completed", { message: "turn completed" });
    h.advance(61_000);
    await b.look(s.id);
    expect(agent.prompts).toHaveLength(1);
  });

  it("a processing prompt the agent answered while its idle boundary was missed is completed, not resent", async () => {
    const s = await runningSession();
    const b = relay("relay-b");
    await holding(b, s.id);
    const p = await h.deps.prompts.enqueue({ sessionId: s.id, content: "answered unseen", source: "user:u", now: h.deps.now() });
    expect(await h.deps.prompts.move(p, "queued", "processing", h.deps.now())).toBe(true);
    // The agent ran the turn, but the relay's stream missed it (its events went nowhere).
    await b.kill();
    await agent.promptAsync(await endpointOf(s.id), agentSessionOf(s), "answered unseen");
    agent.finish(agentSessionOf(s));
    const c = relay("relay-c", relayLeases, h.deps.sandboxKeys, 3600);
    h.advance((TTL + 1) * 1000);
    await holding(c, s.id);
    await waitFor(async () => (await statuses(s.id))[0]?.[1] === "completed", { message: "completed by catch-up" });
    h.advance(61_000);
    await c.look(s.id);
    expect(agent.prompts).toHaveLength(1);
  });

  it("lets go when the session is paused (the flow's nudge): stream closed, claim released", async () => {
    const s = await runningSession();
    const a = relay("relay-a");
    await holding(a, s.id);
    const paused = await h.run("pause", s.id);
    expect(paused.status).toBe("paused");
    await a.pollNudges();
    expect(a.heldSessions()).toEqual([]);
    expect(agent.subscriberCount()).toBe(0);
    // Released, not merely abandoned.
    expect(await relayLeases.view(s.id)).toMatchObject({ relayOwner: null });
    // And a paused session is not picked up by a scan.
    await a.scanNow();
    expect(a.heldSessions()).toEqual([]);
  });

  it("reopens on the new sandbox when the session's runtime changes, and describes only the current sandbox", async () => {
    const s = await runningSession();
    const a = relay("relay-a");
    await holding(a, s.id);
    const moved = await h.deps.sessions.update(s, { sandboxId: "isb_other", codingAgentSessionId: await agent.ensureSession(await endpointOf(s.id)) }, h.deps.now());
    await a.look(s.id);
    expect(a.counters.reopens).toBe(1);
    expect(a.heldSessions()).toEqual([s.id]);
    await waitFor(() => a.streamCounters().open === 1, { message: "reopened stream live" });
    expect(agent.subscriberCount()).toBe(1);

    await prompt(s.id, "on the new runtime");
    await waitFor(async () => (await h.session(s.id)).agentBusy, { message: "busy recorded for the new sandbox" });
    agent.finish(agentSessionOf(moved));
    await waitFor(async () => (await statuses(s.id)).every(([, st]) => st === "completed"), { message: "turn completed" });
    expect(await transcriptOf(s.id)).toEqual([
      ["user", "on the new runtime"],
      ["assistant", "echo: on the new runtime"],
    ]);
  });

  it("drain hands every session over at once: a live peer claims each from the handover nudges, without a scan or a heartbeat round", async () => {
    const s1 = await runningSession();
    const s2 = await runningSession();
    const a = relay("relay-a");
    await a.scanNow();
    expect(a.heldSessions().sort()).toEqual([s1.id, s2.id].sort());
    // The flows' nudges of the sessions' starts: a holds both, so they are done.
    for (let i = 0; i < 5 && h.nudgeQueue.depth > 0; i++) await a.pollNudges();
    expect(h.nudgeQueue.depth).toBe(0);
    // A peer that saw a live at its last round: a's sessions are not its to claim.
    const b = relay("relay-b");
    await b.scanNow();
    expect(b.heldSessions()).toEqual([]);
    const rounds = { scans: b.counters.scans, heartbeats: b.counters.heartbeats };

    await a.drain();
    expect(a.heldSessions()).toEqual([]);
    // One batch: one nudge per session, naming a's retired heartbeat.
    expect(h.nudgeQueue.count("SendMessageBatch")).toBe(1);
    await b.pollNudges();
    expect(b.heldSessions().sort()).toEqual([s1.id, s2.id].sort());
    expect({ scans: b.counters.scans, heartbeats: b.counters.heartbeats }).toEqual(rounds);
    expect(h.nudgeQueue.depth).toBe(0);
    await waitFor(() => b.streamCounters().open === 2, { message: "b streams both" });
    for (const s of [s1, s2]) expect(await relayLeases.view(s.id)).toMatchObject({ relayOwner: "relay-b" });
  });

  it("reaches each agent with its own session's password: every call authenticated, none refused", async () => {
    const s1 = await runningSession();
    const s2 = await runningSession();
    const a = relay("relay-a");
    await a.scanNow();
    await waitFor(() => a.streamCounters().open === 2, { message: "both streams live" });
    await prompt(s1.id, "one");
    await prompt(s2.id, "two");
    await waitFor(() => agent.prompts.length === 2, { message: "both prompts sent" });
    agent.finish(agentSessionOf(s1));
    agent.finish(agentSessionOf(s2));
    await waitFor(async () => (await statuses(s1.id))[0]?.[1] === "completed" && (await statuses(s2.id))[0]?.[1] === "completed", { message: "both turns completed" });
    expect(agent.refused).toBe(0);
    // Passwords differ per session: the first session's would not open the second's agent.
    expect((await endpointOf(s1.id)).authorization).not.toBe((await endpointOf(s2.id)).authorization);
  });

  it("a relay whose keys do not match the sandboxes' is refused by the agent and relays nothing", async () => {
    const s = await runningSession();
    const c = await h.addClient(s.id);
    const wrong = relay("relay-wrong", relayLeases, staticKeyring(`${TEST_MASTER_KEY}-not-this-one`));
    await wrong.scanNow();
    expect(wrong.heldSessions()).toEqual([s.id]);
    await waitFor(() => agent.refused > 0, { message: "the stream refused" });
    expect(wrong.streamCounters().open).toBe(0);
    expect(agent.subscriberCount()).toBe(0);
    expect(streamed(c)).toEqual([]);
  });
});
