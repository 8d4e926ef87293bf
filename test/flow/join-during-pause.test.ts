/**
 * Issue 25 §1: a client that connects, or a resume asked for, at any moment of a pause, an idle
 * snapshot or an expiry migration ends on a running session (or the new sandbox). Real ASL,
 * real step functions, the real `$connect` and resume route handlers over dynalite, and the
 * fault-injecting provider holding the flow at the moment under test.
 *
 * Each moment has its own mechanism:
 * - before the idle snapshot's Snapshot step: the step re-checks the idle predicate and stands
 *   down (the sandbox is never touched);
 * - after it (snapshot taken, sandbox going away): the flow commits `paused` and its finish
 *   resumes the session for whoever arrived (flows/wake-waiters.ts);
 * - a user pause is not undone by a client that was connected before it was asked for.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { runIdleCheck } from "../../functions/idle/idle-check";
import { makeResumeSessionHandler } from "../../functions/http/handlers/resume-session";
import { makeConnectHandler } from "../../functions/ws/handlers/connect";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import type { SessionRecord } from "../../functions/domain/session";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { waitFor } from "../support/wait-for";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";

const TOKEN = "sbx_join_during_pause_token_012345";
const GRACE_MS = 61_000;

let inner: InstantSandboxProvider;
let provider: FaultInjectingProvider;
let h: FlowHarness;

async function setup(capability: "memory" | "filesystem" = "memory"): Promise<void> {
  inner = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: capability === "memory" });
  provider = new FaultInjectingProvider(inner);
  h = await startFlowHarness({
    provider,
    agent: new ScriptedAgent(),
    env: { IDLE_SNAPSHOT_DELAY_SECONDS: "60", MIGRATION_TURN_WAIT_SECONDS: "0.3", ORPHAN_SANDBOX_MIN_AGE_SECONDS: "0" },
  });
  await new DynamoApiTokenStore(h.table.doc, h.table.tableName).putToken(TOKEN, { userId: "user-a", orgId: "org-a" }, new Date());
}

afterEach(async () => {
  await h.close();
});

async function runningSession(): Promise<SessionRecord> {
  const s = await h.createSession({ clientType: "web" });
  await h.run("ensure-runtime", s.id);
  return h.session(s.id);
}

let connections = 0;
/** The real `$connect` handler, as API Gateway calls it. */
async function connect(sessionId: string): Promise<string> {
  const connectionId = `join-${++connections}`;
  const res = await makeConnectHandler(h.wsDeps)({ requestContext: { connectionId, routeKey: "$connect" }, queryStringParameters: { sessionId, token: TOKEN } });
  expect(res.statusCode).toBe(200);
  // What send-init does once the socket is up: from now on the connection gets pushes.
  expect(await h.deps.connections.markReady(sessionId, connectionId, new Date(Date.now() + 600_000))).toBe(true);
  return connectionId;
}

/** The real resume route. */
async function resume(sessionId: string): Promise<number> {
  const event = {
    version: "2.0",
    routeKey: "POST /v1/sessions/{id}/resume",
    rawPath: `/v1/sessions/${sessionId}/resume`,
    rawQueryString: "",
    headers: { authorization: `Bearer ${TOKEN}` },
    pathParameters: { id: sessionId },
    requestContext: { requestId: "req-resume", http: { method: "POST", path: `/v1/sessions/${sessionId}/resume` } },
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
  const res = await makeResumeSessionHandler(h.httpDeps)(event, buildLambdaContext("ResumeSession", "req-resume"));
  return res.statusCode ?? 0;
}

async function idleSnapshotStarted(sessionId: string): Promise<string> {
  h.advance(GRACE_MS);
  const check = await runIdleCheck(h.deps, { sessionId, at: h.deps.now() });
  expect(check.started).toMatch(/^idle-snapshot-/);
  return check.started ?? "";
}

async function settled(sessionId: string): Promise<SessionRecord> {
  await h.runner.whenIdle();
  return h.session(sessionId);
}

function flowsOf(sessionId: string): Promise<{ flow: string; outcome: string; reason: string | null }[]> {
  return h.deps.events.list(sessionId, { limit: 50 }).then((page) => page.items.map((e) => ({ flow: e.flow, outcome: e.outcome, reason: e.reason })));
}

describe("a client joining while an idle snapshot runs", () => {
  it("before the snapshot is taken: the flow stands down at its last safe point, the sandbox is never touched", async () => {
    await setup();
    const s = await runningSession();
    // Begin has decided (idle) and taken the relay lease; the client arrives right then.
    const seize = h.deps.relayLeases.seize;
    let joined: Promise<string> | null = null;
    h.deps.relayLeases.seize = async (...args) => {
      const lease = await seize(...args);
      joined ??= connect(s.id);
      await joined;
      return lease;
    };
    await idleSnapshotStarted(s.id);
    const after = await settled(s.id);
    expect(joined).not.toBeNull();
    expect(after).toMatchObject({ status: "running", sandboxId: s.sandboxId });
    expect(provider.callsOf("memorySnapshot")).toHaveLength(0);
    expect(provider.callsOf("terminate")).toHaveLength(0);
    expect(inner.live()).toEqual([s.sandboxId]);
    const idle = (await flowsOf(s.id)).find((e) => e.flow === "idle-snapshot");
    expect(idle).toMatchObject({ outcome: "skipped" });
  });

  it("while the snapshot is taken: the session pauses, then resumes for the client on the snapshot just taken", async () => {
    await setup();
    const s = await runningSession();
    const hold = provider.hold("memorySnapshot", "before");
    const execution = await idleSnapshotStarted(s.id);
    await hold.reached;
    const connectionId = await connect(s.id);
    hold.release();
    await h.runner.executions.get(execution)?.done;
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running", message: "the session running again for the client" });
    expect(after.sandboxId).not.toBe(s.sandboxId);
    expect(inner.sandbox(after.sandboxId ?? "")?.restoredFrom).toMatch(/^mem:/);
    expect(inner.live()).toEqual([after.sandboxId]);
    expect(h.push.statuses(connectionId).at(-1)).toBe("running");
    const flows = await flowsOf(s.id);
    expect(flows.filter((e) => e.outcome === "committed").map((e) => e.flow)).toEqual(["ensure-runtime", "idle-snapshot", "ensure-runtime"]);
    expect(flows.find((e) => e.reason === "client joined during pause")).toBeTruthy();
  });

  it("while the sandbox is terminated (filesystem snapshot): the same, resumed after the commit", async () => {
    await setup("filesystem");
    const s = await runningSession();
    const hold = provider.hold("terminate", "before");
    const execution = await idleSnapshotStarted(s.id);
    await hold.reached;
    const connectionId = await connect(s.id);
    hold.release();
    await h.runner.executions.get(execution)?.done;
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running", message: "the session running again for the client" });
    expect(after.sandboxId).not.toBe(s.sandboxId);
    expect(h.push.statuses(connectionId).at(-1)).toBe("running");
  });

  it("a resume asked for while the snapshot is taken ends running too (the route saw `running`)", async () => {
    await setup();
    const s = await runningSession();
    const hold = provider.hold("memorySnapshot", "before");
    const execution = await idleSnapshotStarted(s.id);
    await hold.reached;
    expect(await resume(s.id)).toBe(202);
    expect((await h.session(s.id)).status).toBe("running"); // still the old sandbox: nothing started yet
    hold.release();
    await h.runner.executions.get(execution)?.done;
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running" && x.sandboxId !== s.sandboxId, message: "resumed for the request" });
    expect(inner.live()).toEqual([after.sandboxId]);
  });

  it("nobody joined: the session stays paused (no resume for nothing)", async () => {
    await setup();
    const s = await runningSession();
    await idleSnapshotStarted(s.id);
    const after = await settled(s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "inactivity" });
    expect(inner.live()).toEqual([]);
  });
});

describe("a user pause", () => {
  it("is not undone by the client that was connected when it was asked for", async () => {
    await setup();
    const s = await runningSession();
    const connectionId = await connect(s.id);
    await settled(s.id);
    const after = await h.run("pause", s.id);
    expect(after).toMatchObject({ status: "paused", pauseReason: "user" });
    await h.runner.whenIdle();
    expect(await h.session(s.id)).toMatchObject({ status: "paused" });
    expect(h.push.statuses(connectionId).at(-1)).toBe("paused");
  });

  it("a client that connects while it runs ends on a running session", async () => {
    await setup();
    const s = await runningSession();
    const hold = provider.hold("memorySnapshot", "before");
    const { executionName } = await h.start("pause", s.id);
    await hold.reached;
    const connectionId = await connect(s.id);
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running", message: "running again for the late client" });
    expect(after.sandboxId).not.toBe(s.sandboxId);
    expect(h.push.statuses(connectionId).at(-1)).toBe("running");
  });

  it("a client that connects after it was asked for, while its Begin still waits for another flow's lease, ends on a running session", async () => {
    // The execution's start (`$$.Execution.StartTime`, through Begin's Parameters) is the moment
    // that counts, not Begin's lease take: this client came after the pause was asked for.
    await setup();
    const s = await runningSession();
    const other = await h.deps.sessions.acquireLeaseWithSession(s.id, "another-flow", new Date(), h.config.LEASE_TTL_SECONDS);
    const { executionName } = await h.start("pause", s.id);
    const connectionId = await connect(s.id);
    await h.deps.sessions.releaseLease(other.lease);
    await h.runner.executions.get(executionName)?.done;
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running", message: "running again for the client that came after the pause was asked for" });
    expect(after.sandboxId).not.toBe(s.sandboxId);
    expect(h.push.statuses(connectionId).at(-1)).toBe("running");
  });

  it("a resume asked for while it runs ends on a running session", async () => {
    await setup();
    const s = await runningSession();
    const hold = provider.hold("memorySnapshot", "before");
    const { executionName } = await h.start("pause", s.id);
    await hold.reached;
    expect(await resume(s.id)).toBe(202);
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    await waitFor(() => settled(s.id), { until: (x) => x.status === "running" && x.sandboxId !== s.sandboxId, message: "resumed for the request" });
  });
});

describe("an expiry migration", () => {
  it("with nobody connected pauses; a client that connects meanwhile ends on a running session", async () => {
    await setup("filesystem");
    const s = await runningSession();
    const hold = provider.hold("snapshot", "before");
    const fired = await makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    expect(fired.started).toMatch(/^migrate-/);
    await hold.reached;
    const connectionId = await connect(s.id);
    hold.release();
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running" && x.sandboxId !== s.sandboxId, message: "running on a new sandbox" });
    expect(inner.live()).toEqual([after.sandboxId]);
    expect(h.push.statuses(connectionId).at(-1)).toBe("running");
  });

  it("with a client connected moves to the new sandbox; a client joining meanwhile ends there too", async () => {
    await setup("filesystem");
    const s = await runningSession();
    const first = await connect(s.id);
    await settled(s.id);
    const hold = provider.hold("snapshot", "before");
    await makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    await hold.reached;
    const second = await connect(s.id);
    hold.release();
    const after = await waitFor(() => settled(s.id), { until: (x) => x.status === "running" && x.sandboxId !== s.sandboxId, message: "running on the new sandbox" });
    expect(inner.live()).toEqual([after.sandboxId]);
    for (const c of [first, second]) expect(h.push.statuses(c).at(-1)).toBe("running");
  });
});
