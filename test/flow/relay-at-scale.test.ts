/**
 * Issue 15, relay at scale: the relay's liveness is one heartbeat item per process, a held
 * session names its relay and epoch (written once at claim), and per-session changes reach the
 * relay by nudges, never by per-session polling. The real flows, store and prompt queue (flow
 * harness over dynalite, instant provider), a fake OpenCode the test drives, several relays in
 * this process. The clock moves through the harness; conditions are awaited with a bound.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { SessionRecord } from "../../functions/domain/session";
import { runIdleCheck } from "../../functions/idle/idle-check";
import { StreamingRelay, type RelayOptions } from "../../functions/relay/relay";
import { submitPrompt } from "../../functions/services/submit-prompt";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoTranscriptStore } from "../../functions/store/dynamo-transcript";
import { GSI_BY_RELAY } from "../../functions/store/table-layout";
import { FakeOpenCode } from "../support/fake-opencode";
import { harnessRelay } from "../support/harness-relay";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { waitFor } from "../support/wait-for";

const TTL = 30;
const MANY = 10;
let h: FlowHarness;
let agent: FakeOpenCode;
let transcript: DynamoTranscriptStore;
const relays: StreamingRelay[] = [];

beforeEach(async () => {
  agent = new FakeOpenCode();
  h = await startFlowHarness({ provider: new InstantSandboxProvider(), agent });
  // What the relays' claims say, not "always watched": delivery and the idle predicate read the store.
  h.setRelayWatched("store");
  transcript = new DynamoTranscriptStore(h.table.doc, h.table.tableName);
});
afterEach(async () => {
  vi.restoreAllMocks();
  for (const r of relays.splice(0)) await r.drain();
  await h.close();
});

/** A relay with its own store instance (as a separate process would have), reading the flows' nudges. */
function relay(ownerId: string, ttl = TTL, options: Pick<RelayOptions, "backstopPageSize" | "claimPacing"> = {}): StreamingRelay {
  const r = harnessRelay(h, { agent, transcript }, { ownerId, leaseTtlSeconds: ttl, ...options });
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

async function prompt(sessionId: string, content: string) {
  return submitPrompt(h.deps, await h.session(sessionId), { content, source: "user:u" });
}

function finalizes(connectionId: string) {
  return h.push.sent.filter((s) => s.connectionId === connectionId && s.message.type === "message.finalize").map((s) => s.message);
}

async function transcriptOf(sessionId: string) {
  return (await transcript.list(sessionId, { limit: 100 })).items.map((m) => [m.role, m.text]);
}

/** Sessions created while no relay runs (the harness's nudges wait in its queue; nobody receives them yet). */
async function runningSessions(n: number): Promise<SessionRecord[]> {
  const out: SessionRecord[] = [];
  for (let i = 0; i < n; i++) out.push(await runningSession());
  return out;
}

describe("relay at scale (issue 15)", () => {
  it("a relay killed while holding many sessions is replaced within the heartbeat TTL, with no finalized message lost or duplicated", async () => {
    const sessions = await runningSessions(MANY);
    const clients = await Promise.all(sessions.map((s) => h.addClient(s.id)));
    const a = relay("relay-a");
    await a.scanNow();
    expect(a.heldSessions()).toHaveLength(MANY);
    await waitFor(() => a.streamCounters().open === MANY, { message: "every stream live on A" });
    // First claims of sessions nobody held are no takeovers (issue 19: RelayTakeovers).
    expect(h.metrics.values("RelayTakeovers")).toEqual([]);
    // Half the sessions are mid-turn when A dies; one turn of the other half ends while nobody watches.
    for (const s of sessions) await prompt(s.id, `task ${s.id}`);
    await waitFor(() => agent.prompts.length === MANY, { message: "every prompt sent" });
    await a.kill();
    const unwatched = sessions.slice(0, MANY / 2);
    for (const s of unwatched) agent.finish(agentSessionOf(s));

    // B starts halfway through A's TTL: A's heartbeat still lives, so B takes nothing.
    h.advance((TTL / 2) * 1000);
    const b = relay("relay-b");
    await b.scanNow();
    await b.heartbeatNow();
    expect(b.heldSessions()).toEqual([]);
    // A's heartbeat runs out: B's next heartbeat round sees it gone and takes every session over.
    h.advance((TTL / 2 + 1) * 1000);
    const scans = b.counters.scans;
    await b.heartbeatNow();
    await waitFor(() => b.counters.scans > scans && b.heldSessions().length === MANY, { message: "B holds every session" });
    await waitFor(() => b.streamCounters().open === MANY, { message: "every stream live on B" });
    expect(h.metrics.values("RelayTakeovers")).toEqual(Array.from({ length: MANY }, () => 1));

    for (const s of sessions.slice(MANY / 2)) agent.finish(agentSessionOf(s));
    for (const s of sessions) {
      await waitFor(async () => (await h.deps.prompts.list(s.id)).every((p) => p.status === "completed"), { message: `turn of ${s.id} completed` });
      expect(await transcriptOf(s.id)).toEqual([
        ["user", `task ${s.id}`],
        ["assistant", `echo: task ${s.id}`],
      ]);
    }
    // Every client saw each finished turn's finalize exactly once (a turn that ended unwatched
    // is persisted by catch-up; the client reads it in the transcript).
    for (const [i, c] of clients.entries()) {
      const mine = finalizes(c);
      expect(mine.length).toBeLessThanOrEqual(1);
      if (i >= MANY / 2) expect(mine).toHaveLength(1);
    }
    expect(agent.prompts).toHaveLength(MANY);
  });

  it("two relays racing for the same sessions (scans and nudges at once, then a takeover) never both stream one", async () => {
    const sessions = await runningSessions(MANY);
    const a = relay("relay-a");
    const b = relay("relay-b");
    await Promise.all([a.scanNow(), b.scanNow(), ...sessions.flatMap((s) => [a.look(s.id), b.look(s.id)])]);
    const heldA = a.heldSessions();
    const heldB = b.heldSessions();
    expect(heldA.filter((id) => heldB.includes(id))).toEqual([]);
    expect([...heldA, ...heldB].sort()).toEqual(sessions.map((s) => s.id).sort());
    await waitFor(() => a.streamCounters().open + b.streamCounters().open === MANY, { message: "every stream live" });
    expect(agent.subscriberCount()).toBe(MANY);

    // A dies; C and D race for its sessions once its heartbeat is out (B keeps its own).
    await a.kill();
    h.advance((TTL + 1) * 1000);
    const c = relay("relay-c");
    const d = relay("relay-d");
    await Promise.all([c.scanNow(), d.scanNow(), b.heartbeatNow()]);
    const after = [b, c, d].map((r) => r.heldSessions());
    const all = after.flat();
    expect(new Set(all).size).toBe(all.length);
    await waitFor(() => [b, c, d].reduce((n, r) => n + r.streamCounters().open, 0) === MANY, { message: "every stream live again" });
    await waitFor(() => agent.subscriberCount() === MANY, { message: "one stream per session" });
  });

  it("a peer's death is taken over by reading that peer's sessions only (the byRelay index), not every running session", async () => {
    const sessions = await runningSessions(6);
    const ofA = sessions.slice(0, 3).map((s) => s.id);
    const ofC = sessions.slice(3).map((s) => s.id);
    const a = relay("relay-a");
    const c = relay("relay-c", 3600);
    for (const id of ofA) await a.look(id);
    for (const id of ofC) await c.look(id);
    expect(a.heldSessions().sort()).toEqual([...ofA].sort());
    expect(c.heldSessions().sort()).toEqual([...ofC].sort());
    const b = relay("relay-b", 3600);
    await b.scanNow();
    await b.heartbeatNow();
    expect(b.heldSessions()).toEqual([]);

    await a.kill();
    h.advance((TTL + 1) * 1000);
    const send = vi.spyOn(h.table.doc, "send");
    await b.heartbeatNow();
    await waitFor(() => b.heldSessions().length === 3, { message: "B took A's sessions over" });
    expect(b.heldSessions().sort()).toEqual([...ofA].sort());
    const commands = send.mock.calls.map(([command]) => command as unknown as { constructor: { name: string }; input: { IndexName?: string; Key?: { PK?: string }; ExpressionAttributeValues?: Record<string, unknown> } });
    const listings = commands.filter((command) => command.constructor.name === "QueryCommand" && command.input.IndexName !== undefined);
    expect(listings.map((command) => [command.input.IndexName, command.input.ExpressionAttributeValues?.[":key"]])).toEqual([[GSI_BY_RELAY, "relay-a"]]);
    // Claims read A's sessions, never C's.
    const read = commands.filter((command) => command.constructor.name === "GetCommand" && command.input.Key?.PK?.startsWith("SESSION#")).map((command) => command.input.Key?.PK?.slice("SESSION#".length));
    expect(read.filter((id) => ofC.includes(id ?? ""))).toEqual([]);
    expect(new Set(read)).toEqual(new Set(ofA));
    expect(c.heldSessions().sort()).toEqual([...ofC].sort());
    await waitFor(() => agent.subscriberCount() === 6, { message: "one stream per session" });
  });

  it("a takeover whose read of the dead relay's sessions fails falls back to a full scan, and still takes every session over", async () => {
    const sessions = await runningSessions(3);
    const a = relay("relay-a");
    await a.scanNow();
    expect(a.heldSessions()).toHaveLength(3);
    const leases = new DynamoRelayLeaseStore(h.table.doc, h.table.tableName);
    const listHeldBy = vi.spyOn(leases, "listHeldBy").mockRejectedValue(new Error("ValidationException: The table does not have the specified index: GSI3"));
    const listClaimable = vi.spyOn(leases, "listClaimable");
    const b = harnessRelay(h, { agent, transcript, relayLeases: leases }, { ownerId: "relay-b", leaseTtlSeconds: 3600 });
    relays.push(b);
    await b.scanNow();
    await b.heartbeatNow();
    const scansBefore = listClaimable.mock.calls.length;

    await a.kill();
    h.advance((TTL + 1) * 1000);
    await b.heartbeatNow();
    await waitFor(() => b.heldSessions().length === 3, { message: "B took A's sessions over" });
    expect(listHeldBy).toHaveBeenCalledWith("relay-a", expect.any(Date), expect.anything());
    expect(listClaimable.mock.calls.length).toBeGreaterThan(scansBefore);
    expect(b.heldSessions().sort()).toEqual(sessions.map((s) => s.id).sort());
  });

  it("a takeover's claims are paced: with the event loop over its target, each claim waits for the previous one's stream to catch up", async () => {
    const sessions = await runningSessions(MANY);
    /** Claims written whose stream had not yet caught up, as each claim is attempted; the most seen. */
    const pipelined = (r: StreamingRelay) => {
      const leases = (r as unknown as { deps: { relayLeases: DynamoRelayLeaseStore } }).deps.relayLeases;
      const claim = leases.claim.bind(leases);
      const seen = { written: 0, most: 0 };
      leases.claim = async (...args) => {
        seen.most = Math.max(seen.most, seen.written - r.streamCounters().open);
        const claimed = await claim(...args);
        if (claimed) seen.written++;
        return claimed;
      };
      return seen;
    };
    // A loop always busy: the pacer stays at one claim from its write to its first catch-up.
    const busy = relay("relay-busy", TTL, { claimPacing: { initial: 4, utilization: () => 1, sampleMs: 0 } });
    const paced = pipelined(busy);
    await busy.scanNow();
    expect(busy.heldSessions()).toHaveLength(MANY);
    await waitFor(() => busy.streamCounters().open === MANY, { message: "every stream live" });
    expect(paced.written).toBe(MANY);
    expect(paced.most).toBe(0);
    expect(busy.pacer.stats.highestLimit).toBe(4);
    expect(busy.pacer.limit).toBe(1);

    // The same takeover with an idle loop: claims overlap their catch-ups (what the check above would see unpaced).
    await busy.kill();
    h.advance((TTL + 1) * 1000);
    const idle = relay("relay-idle", TTL, { claimPacing: { initial: 8, utilization: () => 0 } });
    const overlapped = pipelined(idle);
    await idle.scanNow();
    await waitFor(() => idle.streamCounters().open === MANY, { message: "every stream live on the idle relay" });
    expect(overlapped.written).toBe(MANY);
    expect(overlapped.most).toBeGreaterThan(0);
    for (const s of sessions) expect(idle.heldSessions()).toContain(s.id);
  });

  it("held streams cost no DynamoDB request at rest: each heartbeat round is one write and one read, whatever the number held", async () => {
    await runningSessions(MANY);
    const a = relay("relay-a", 3600);
    await a.scanNow();
    await waitFor(() => a.streamCounters().open === MANY, { message: "every stream live" });
    // `open` counts a stream once its (re)connect catch-up has run: from here on nothing happens.
    const send = vi.spyOn(h.table.doc, "send");
    const rounds = 5;
    for (let i = 0; i < rounds; i++) {
      h.advance(10_000);
      await a.heartbeatNow();
    }
    const names = send.mock.calls.map(([command]) => command.constructor.name);
    expect(names).toEqual(Array.from({ length: rounds }, () => ["UpdateCommand", "QueryCommand"]).flat());
    expect(a.heldSessions()).toHaveLength(MANY);
  });

  it("a session paused by an idle snapshot is dropped by its relay from the flow's nudge, with one read of that session only", async () => {
    const sessions = await runningSessions(3);
    const a = relay("relay-a", 3600);
    await a.scanNow();
    await waitFor(() => a.streamCounters().open === 3, { message: "every stream live" });
    const [target] = sessions;
    if (!target) throw new Error("no session");
    await waitFor(() => h.session(target.id), { until: (s) => s.lastKnownAgentIdleAt !== null, message: "the relay saw the agent idle" });
    await a.pollNudges(); // the nudges of the ensure-runtime commits
    const revalidations = a.counters.revalidations;
    h.advance(h.config.IDLE_SNAPSHOT_DELAY_SECONDS * 1000 + 1_000);
    const check = await runIdleCheck(h.deps, { sessionId: target.id, at: h.deps.now() });
    expect(check.started).toBeTruthy();
    await h.runner.executions.get(check.started ?? "")?.done;
    expect((await h.session(target.id)).status).toBe("paused");

    await a.pollNudges();
    expect(a.heldSessions().sort()).toEqual(sessions.slice(1).map((s) => s.id).sort());
    expect(a.counters.revalidations - revalidations).toBe(1);
    expect(agent.subscriberCount()).toBe(2);
  });

  it("a nudge another relay receives first is left in the queue for the relay holding the session (SQS: one queue, every relay long-polls)", async () => {
    const [s] = await runningSessions(1);
    if (!s) throw new Error("no session");
    const a = relay("relay-a", 3600);
    await a.scanNow();
    expect(a.heldSessions()).toEqual([s.id]);
    const b = relay("relay-b", 3600);
    await b.scanNow(); // b registers, sees a live (and its claim): two relays share the queue
    await a.pollNudges(); // the ensure-runtime commit's nudge: a holds the session, done
    expect(h.nudgeQueue.depth).toBe(0);

    await h.run("pause", s.id);
    expect(h.nudgeQueue.depth).toBe(1);
    await b.pollNudges(); // b received it first: not its session, so left for the others
    expect(h.nudgeQueue.depth).toBe(1);
    expect(h.nudgeQueue.count("ChangeMessageVisibility")).toBe(1);
    expect(a.heldSessions()).toEqual([s.id]);
    await a.pollNudges(); // a holds it: revalidates, drops the paused session, done
    expect(a.heldSessions()).toEqual([]);
    expect(h.nudgeQueue.depth).toBe(0);
  });

  it("the backstop reads one page of the running sessions per period and goes on from there, so a lost nudge is still covered", async () => {
    const sessions = await runningSessions(5);
    // The nudges of those commits were lost (drop them): only the backstop finds the sessions.
    const lost = await h.nudgeSource().receive();
    await Promise.all(lost.map((n) => n.done()));
    const r = relay("relay-p", 3600, { backstopPageSize: 2 });
    const send = vi.spyOn(h.table.doc, "send");
    const held: number[] = [];
    for (let period = 0; period < 3; period++) {
      await r.backstopNow();
      held.push(r.heldSessions().length);
    }
    // Two sessions a period, each period one page (one Query of the running sessions).
    expect(held).toEqual([2, 4, 5]);
    const pages = send.mock.calls.filter(([command]) => command.constructor.name === "QueryCommand" && (command.input as { IndexName?: string }).IndexName !== undefined);
    expect(pages).toHaveLength(3);
    expect(r.heldSessions().sort()).toEqual(sessions.map((s) => s.id).sort());
    expect(r.counters.backstopPages).toBe(3);
  });

  it("a relay whose own heartbeat ran out (a stall) stops acting on every stream, then comes back as a new epoch and reclaims them", async () => {
    const sessions = await runningSessions(3);
    const a = relay("relay-a");
    await a.scanNow();
    await waitFor(() => a.streamCounters().open === 3, { message: "every stream live" });
    const epoch = a.epoch;
    h.advance((TTL + 1) * 1000);
    await a.heartbeatNow();
    expect(a.counters.leasesLost).toBe(3);
    expect(a.epoch).toBe((epoch ?? 0) + 1);
    await waitFor(() => a.heldSessions().length === 3, { message: "reclaimed by the new epoch's scan" });
    expect(a.heldSessions().sort()).toEqual(sessions.map((s) => s.id).sort());
    await waitFor(() => agent.subscriberCount() === 3, { message: "one stream per session" });
  });

  it("a resume is watched at once: the flow's nudge makes a relay claim it, and the first prompt is sent, no scan involved", async () => {
    const s = await runningSession();
    const a = relay("relay-a", 3600);
    await a.scanNow();
    const scans = a.counters.scans;
    await h.run("pause", s.id);
    await a.pollNudges();
    expect(a.heldSessions()).toEqual([]);
    const resumed = await h.run("ensure-runtime", s.id);
    expect(resumed.status).toBe("running");
    await a.pollNudges();
    expect(a.heldSessions()).toEqual([s.id]);
    expect(a.counters.scans).toBe(scans);
    // The relay's catch-up on connect delivers queued prompts itself: let it settle first.
    await waitFor(() => a.streamCounters().open === 1, { message: "the new stream live" });
    expect(await prompt(s.id, "first after resume")).toMatchObject({ status: "processing", delivery: "sent" });
  });
});
