/**
 * Usage metering, limits and credits (issue 16, API.md "Usage, limits and credits") over the real
 * flows, store (dynalite), scheduler and routes:
 * - metered usage per UTC day equals the sessions' `activeSeconds` to the millisecond across
 *   run, migration (one continuous interval), pause, resume, stop and a UTC midnight, however
 *   many passes run at once or are repeated;
 * - randomized interleavings (seed in the test name): metering passes racing idle snapshots,
 *   pauses and resumes never double-count nor resume anything; resumes, wakes and flow starts
 *   racing at `maxRunningSessions` never run more sessions than allowed, and two resumes at
 *   `max - 1` start exactly one;
 * - a spent budget pauses every running session of the org through the pause flow
 *   (`credit_limit`, snapshot kept) and refuses resume and wake with 402 until it is raised.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { makeResumeSessionHandler } from "../../functions/http/handlers/resume-session";
import { makeCreatePromptHandler } from "../../functions/http/handlers/create-prompt";
import type { SessionRecord } from "../../functions/domain/session";
import { utcDay } from "../../functions/domain/usage";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { meterRunningSessions } from "../../functions/usage/metering-pass";
import { METRIC_NAMES } from "../../functions/ports/metrics-sink";
import { opsSummary } from "../../functions/observability/ops-summary";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { seededRandom } from "../support/seeded-random";

const TOKEN = "sbx_usage_metering_token_0123456789";
const DAY_MS = 86_400_000;

let h: FlowHarness;

/** `graceSeconds`: the idle grace (short in the interleavings, so idle snapshots race the passes). */
async function setup(options: { snapshotDelayMs?: number; graceSeconds?: number } = {}): Promise<void> {
  const grace = String(options.graceSeconds ?? 600);
  const provider = new FaultInjectingProvider(new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: true }));
  if (options.snapshotDelayMs) provider.delay("memorySnapshot", options.snapshotDelayMs);
  h = await startFlowHarness({ provider, agent: new ScriptedAgent(), env: { IDLE_SNAPSHOT_DELAY_SECONDS: grace, AUTOMATION_IDLE_GRACE_SECONDS: grace, ORPHAN_SANDBOX_MIN_AGE_SECONDS: "0" } });
  await new DynamoApiTokenStore(h.table.doc, h.table.tableName).putToken(TOKEN, { userId: "user-a", orgId: "org-a" }, new Date());
}

afterEach(async () => {
  await h.close();
});

const meter = () => meterRunningSessions(h.deps);

async function runningSession(orgId = "org-a", clientType: SessionRecord["clientType"] = "web"): Promise<SessionRecord> {
  const s = await h.createSession({ clientType, orgId });
  await h.run("ensure-runtime", s.id);
  return h.session(s.id);
}

/** Every usage item's milliseconds for the org, all days. */
async function usageMs(orgId: string): Promise<number> {
  const days = await h.deps.usage.usageByDay(orgId, "2000-01-01", "2999-12-31");
  return days.reduce((sum, d) => sum + Math.round(d.activeSeconds * 1000), 0);
}

function routeEvent(method: string, routeKey: string, path: string, sessionId: string, body?: unknown): APIGatewayProxyEventV2 {
  return {
    version: "2.0",
    routeKey,
    rawPath: path,
    rawQueryString: "",
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
    pathParameters: { id: sessionId },
    requestContext: { requestId: `req-${Math.random().toString(36).slice(2)}`, http: { method, path } },
    ...(body ? { body: JSON.stringify(body) } : {}),
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

/** The real resume route. */
async function resume(sessionId: string): Promise<{ status: number; code?: string }> {
  const path = `/v1/sessions/${sessionId}/resume`;
  const res = await makeResumeSessionHandler(h.httpDeps)(routeEvent("POST", "POST /v1/sessions/{id}/resume", path, sessionId), buildLambdaContext("ResumeSession", "req"));
  const body = JSON.parse(String(res.body ?? "{}")) as { error?: { code: string } };
  return { status: res.statusCode ?? 0, ...(body.error ? { code: body.error.code } : {}) };
}

/** The real prompt route (a prompt to a paused session wakes it). */
async function prompt(sessionId: string, content: string): Promise<{ status: number; code?: string }> {
  const path = `/v1/sessions/${sessionId}/prompts`;
  const res = await makeCreatePromptHandler(h.httpDeps)(routeEvent("POST", "POST /v1/sessions/{id}/prompts", path, sessionId, { content }), buildLambdaContext("CreatePrompt", "req"));
  const body = JSON.parse(String(res.body ?? "{}")) as { error?: { code: string } };
  return { status: res.statusCode ?? 0, ...(body.error ? { code: body.error.code } : {}) };
}

async function runningCount(orgId: string): Promise<number> {
  return h.deps.usage.countRunning(orgId);
}

describe("metering", () => {
  it("usage per UTC day equals activeSeconds to the millisecond across run, migration, pause, resume, stop and a midnight; repeated and concurrent passes add nothing", async () => {
    await setup();
    // Headless: an expiry migration keeps it running without a connected client.
    const s = await runningSession("org-a", "automation");
    const start = (await h.session(s.id)).runningSince ?? "";
    // Three passes at once, then the same again: one interval, written as a max-register.
    await Promise.all([meter(), meter(), meter()]);
    await Promise.all([meter(), meter()]);
    // Across the next UTC midnight.
    const now = h.deps.now().getTime();
    h.advance(Math.ceil(now / DAY_MS) * DAY_MS - now + 90_000);
    await Promise.all([meter(), meter()]);
    // An expiry migration keeps one continuous interval (runningSince unchanged).
    const migrated = await h.run("migrate", s.id);
    expect(migrated.status).toBe("running");
    expect(migrated.runningSince).toBe(start);
    await meter();
    h.advance(1_234);
    const paused = await h.run("pause", s.id);
    expect(paused.status).toBe("paused");
    // A pass after the pause and a retried close write find nothing new.
    expect((await meter()).metered).toBe(0);
    expect(await h.deps.usage.meterInterval({ orgId: "org-a", sessionId: s.id, intervalStart: start, until: new Date(paused.pausedAt ?? "") })).toBe(0);
    await h.run("ensure-runtime", s.id);
    h.advance(777);
    await meter();
    const stopped = await h.run("stop", s.id);
    expect(stopped.status).toBe("stopped");

    const days = await h.deps.usage.usageByDay("org-a", utcDay(new Date(start)), utcDay(h.deps.now()));
    expect(days.length).toBe(2);
    expect(days.every((d) => d.sessions === 1)).toBe(true);
    expect(await usageMs("org-a")).toBe(Math.round(stopped.activeSeconds * 1000));
    expect(stopped.activeSeconds).toBeGreaterThan(90);
    // ActiveSeconds (by org) counts every recorded second once: the passes' and the closes'.
    const published = h.metrics.recorded.filter((m) => m.name === METRIC_NAMES.activeSeconds && m.dimensions.orgId === "org-a");
    expect(published.reduce((sum, m) => sum + Math.round(m.value * 1000), 0)).toBe(Math.round(stopped.activeSeconds * 1000));
    // The same seconds by provider (issue 19: SandboxSeconds, the Cost dashboard).
    const byProvider = h.metrics.recorded.filter((m) => m.name === METRIC_NAMES.sandboxSeconds);
    expect(byProvider.length).toBeGreaterThan(0);
    expect(byProvider.every((m) => m.dimensions.Provider === stopped.provider)).toBe(true);
    expect(byProvider.reduce((sum, m) => sum + Math.round(m.value * 1000), 0)).toBe(Math.round(stopped.activeSeconds * 1000));
  });

  for (const seed of [11, 22, 33, 44]) {
    it(`seed ${seed}: metering passes racing idle snapshots, pauses and resumes never double-count nor resume anything`, async () => {
      await setup({ snapshotDelayMs: 40, graceSeconds: 0.05 });
      const random = seededRandom(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
      // One org per session: the org's usage is that session's.
      const sessions = await Promise.all(["org-r1", "org-r2", "org-r3"].map((org) => runningSession(org)));
      const inFlight: Promise<unknown>[] = [];
      for (let step = 0; step < 30; step++) {
        const s = pick(sessions);
        switch (pick(["meter", "meter", "idle", "pause", "resume", "advance"] as const)) {
          case "meter":
            inFlight.push(meter());
            break;
          case "idle":
            inFlight.push(h.start("idle-snapshot", s.id, "idle-check", "inactivity"));
            break;
          case "pause":
            inFlight.push(h.start("pause", s.id, "user:user-a", "user"));
            break;
          case "resume":
            inFlight.push(h.start("ensure-runtime", s.id, "user:user-a", "resume"));
            break;
          case "advance":
            h.advance(Math.floor(random() * 5_000));
            break;
        }
        if (random() < 0.4) await new Promise((resolve) => setImmediate(resolve));
      }
      await Promise.all(inFlight);
      await h.runner.whenIdle();
      const statusesBefore = await Promise.all(sessions.map(async (s) => (await h.session(s.id)).status));
      // A pass on its own never resumes anything.
      await Promise.all([meter(), meter()]);
      await h.runner.whenIdle();
      expect(await Promise.all(sessions.map(async (s) => (await h.session(s.id)).status))).toEqual(statusesBefore);
      for (const s of sessions) {
        const events = await h.deps.events.list(s.id, { limit: 200 });
        expect(events.items.filter((e) => e.actor === "metering")).toEqual([]);
        await h.run("stop", s.id);
        const stopped = await h.session(s.id);
        expect(await usageMs(s.orgId), `${s.orgId} usage vs activeSeconds`).toBe(Math.round(stopped.activeSeconds * 1000));
      }
    });
  }
});

describe("the sessions-by-status gauge (issue 19)", () => {
  it("each pass publishes SessionsByStatus for every non-terminal status, zeros included, as the store counts them; the local summary shows the last", async () => {
    await setup();
    const running = await Promise.all([runningSession("org-a"), runningSession("org-b")]);
    const paused = await runningSession("org-c");
    await h.run("pause", paused.id);
    const starting = await h.createSession({ orgId: "org-a" });
    const failed = await h.createSession({ orgId: "org-b" });
    await h.deps.sessions.transition(failed, "error", h.deps.now());
    const gone = await runningSession("org-a");
    await h.run("stop", gone.id);
    expect((await h.session(starting.id)).status).toBe("starting");

    const report = await meter();
    expect(report.errors).toBe(0);
    expect(report.sessionsByStatus).toEqual({ starting: 1, running: running.length, paused: 1, error: 1 });
    const gauge = () => h.metrics.recorded.filter((m) => m.name === METRIC_NAMES.sessionsByStatus).map((m) => [m.dimensions.Status, m.value]);
    expect(gauge()).toEqual([
      ["starting", 1],
      ["running", 2],
      ["paused", 1],
      ["error", 1],
    ]);
    // A status emptied since reads 0 on the next pass (a gauge falls back, it does not hold its last value).
    await h.run("stop", failed.id);
    await h.run("stop", starting.id);
    await meter();
    expect(gauge().slice(4)).toEqual([
      ["starting", 0],
      ["running", 2],
      ["paused", 1],
      ["error", 0],
    ]);
    const summary = opsSummary({ recorded: h.metrics.recorded, heldStreams: 0, since: new Date(0), now: h.deps.now() });
    expect(summary.sessionsByStatus).toEqual({ starting: 0, running: 2, paused: 1, error: 0 });
  });
});

describe("the close of an interval", () => {
  it("corrects a pass that read the session while it ran and wrote past its end, and no later pass writes it again", async () => {
    await setup();
    const at = (s: number) => new Date(Date.parse("2026-03-01T10:00:00.000Z") + s * 1000);
    const interval = { orgId: "org-close", sessionId: "ses_close", intervalStart: at(0).toISOString() };
    // The pass read the session running, then wrote up to its own now (10 s) before the transition's close (7 s) landed.
    expect(await h.deps.usage.meterInterval({ ...interval, until: at(10) })).toBe(10);
    await h.deps.usage.meterInterval({ ...interval, until: at(7), final: true });
    expect(await usageMs("org-close")).toBe(7_000);
    // A retried close writes the same; a pass after the close writes nothing, however late its now.
    await h.deps.usage.meterInterval({ ...interval, until: at(7), final: true });
    expect(await h.deps.usage.meterInterval({ ...interval, until: at(20) })).toBe(0);
    expect(await usageMs("org-close")).toBe(7_000);
  });
});

describe("maxRunningSessions", () => {
  it("two resumes racing at maxRunningSessions - 1 start exactly one; the other is a 429 quota_exceeded", async () => {
    await setup();
    const [a, b, c] = [await runningSession(), await runningSession(), await runningSession()];
    await h.run("pause", b?.id ?? "");
    await h.run("pause", c?.id ?? "");
    await h.deps.usage.putLimits("org-a", { maxRunningSessions: 2 }, h.deps.now());
    const results = await Promise.all([resume(b?.id ?? ""), resume(c?.id ?? "")]);
    expect(results.map((r) => r.status).sort()).toEqual([202, 429]);
    expect(results.find((r) => r.status === 429)?.code).toBe("quota_exceeded");
    await h.runner.whenIdle();
    expect(await runningCount("org-a")).toBe(2);
    expect((await h.session(a?.id ?? "")).status).toBe("running");
    // A prompt to the paused one is stored and refused its wake (429); raising the limit lets it resume.
    const refused = results[0]?.status === 429 ? b : c;
    expect(await prompt(refused?.id ?? "", "later")).toEqual({ status: 429, code: "quota_exceeded" });
    expect((await h.deps.prompts.list(refused?.id ?? "", "queued")).length).toBe(1);
    await h.deps.usage.putLimits("org-a", { maxRunningSessions: 3 }, h.deps.now());
    expect((await resume(refused?.id ?? "")).status).toBe(202);
    await h.runner.whenIdle();
    expect((await h.session(refused?.id ?? "")).status).toBe("running");
  });

  for (const seed of [5, 6, 7]) {
    it(`seed ${seed}: resumes, wakes and flow starts racing at the limit never run more than maxRunningSessions`, async () => {
      await setup({ snapshotDelayMs: 20 });
      const random = seededRandom(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
      const sessions: SessionRecord[] = [];
      for (let i = 0; i < 5; i++) {
        const s = await runningSession();
        await h.run("pause", s.id);
        sessions.push(s);
      }
      const MAX = 2;
      await h.deps.usage.putLimits("org-a", { maxRunningSessions: MAX }, h.deps.now());
      let peak = 0;
      const watch = setInterval(() => {
        void runningCount("org-a").then((n) => (peak = Math.max(peak, n)));
      }, 5);
      const inFlight: Promise<unknown>[] = [];
      try {
        for (let step = 0; step < 30; step++) {
          const s = pick(sessions);
          switch (pick(["resume", "resume", "wake", "flow", "pause"] as const)) {
            case "resume":
              inFlight.push(resume(s.id));
              break;
            case "wake":
              inFlight.push(prompt(s.id, `p${step}`));
              break;
            case "flow":
              // A client connecting starts ensure-runtime directly: the flow's own admission decides.
              inFlight.push(h.start("ensure-runtime", s.id, "ws:connect", "connect"));
              break;
            case "pause":
              inFlight.push(h.start("pause", s.id, "user:user-a", "user"));
              break;
          }
          if (random() < 0.5) await new Promise((resolve) => setImmediate(resolve));
          peak = Math.max(peak, await runningCount("org-a"));
        }
        await Promise.all(inFlight);
        await h.runner.whenIdle();
      } finally {
        clearInterval(watch);
      }
      peak = Math.max(peak, await runningCount("org-a"));
      expect(peak).toBeLessThanOrEqual(MAX);
    });
  }
});

describe("monthlyActiveSeconds", () => {
  it("a spent budget pauses every running session of the org (credit_limit, snapshot kept); resume and wake are 402 until the limit is raised", async () => {
    await setup();
    const a = await runningSession();
    const b = await runningSession();
    const other = await runningSession("org-other");
    await h.deps.usage.putLimits("org-a", { monthlyActiveSeconds: 2 }, h.deps.now());
    h.advance(1_500);
    // 2 sessions x 1.5 s: spent.
    const report = await meter();
    // The pass counts what it read: three running sessions (issue 19: RunningSessions by provider).
    expect(h.metrics.recorded.filter((m) => m.name === METRIC_NAMES.runningSessions).at(-1)).toMatchObject({ value: 3, dimensions: { Provider: a.provider } });
    expect(report.paused.sort()).toEqual([a.id, b.id].sort());
    await h.runner.whenIdle();
    for (const s of [a, b]) {
      const paused = await h.session(s.id);
      expect(paused.status).toBe("paused");
      expect(paused.pauseReason).toBe("credit_limit");
      expect(paused.snapshotId).not.toBeNull();
      const events = await h.deps.events.list(s.id, { limit: 50 });
      expect(events.items.some((e) => e.flow === "pause" && e.outcome === "committed" && e.reason === "credit_limit")).toBe(true);
    }
    expect((await h.session(other.id)).status).toBe("running");
    expect(h.metrics.values(METRIC_NAMES.creditPauses)).toEqual([1, 1]);
    expect(h.metrics.recorded.some((m) => m.name === METRIC_NAMES.activeSeconds && m.dimensions.orgId === "org-a" && m.value > 0)).toBe(true);
    // A second pass starts nothing new.
    expect((await meter()).paused).toEqual([]);

    expect(await resume(a.id)).toEqual({ status: 402, code: "credits_exhausted" });
    expect(await prompt(b.id, "run this later")).toEqual({ status: 402, code: "credits_exhausted" });
    expect((await h.deps.prompts.list(b.id, "queued")).length).toBe(1);
    // A flow started any other way (a client connecting) stands down, saying why.
    await h.run("ensure-runtime", a.id, "ws:connect", "connect");
    expect((await h.session(a.id)).status).toBe("paused");
    const skipped = (await h.deps.events.list(a.id, { limit: 50 })).items.find((e) => e.flow === "ensure-runtime" && e.outcome === "skipped");
    expect(skipped?.message ?? "").toContain("credits_exhausted");

    await h.deps.usage.putLimits("org-a", { monthlyActiveSeconds: null }, h.deps.now());
    expect((await resume(a.id)).status).toBe(202);
    await h.runner.whenIdle();
    expect((await h.session(a.id)).status).toBe("running");
  });
});
