/**
 * Scheduled automations end to end (issue 18; API.md "Automations") on the local runtime: real
 * sockets, the real local provider with real OpenCode and the development model, the in-process
 * relay, the local automation timers (croner) driving the same `automation-fired` handler as
 * EventBridge Scheduler does in AWS. The local minimum interval is lowered so `rate(<n> seconds)`
 * schedules fire within the test; a `modal` provider that always fails stands in for a broken one.
 * The run's trigger context is read where the agent reads it (`.proliferate/trigger-context.json`
 * in the sandbox's workspace).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { handleAutomationFired } from "../../functions/automations/automation-runs";
import { ProviderError } from "../../functions/domain/errors";
import type { SandboxProvider } from "../../functions/ports/sandbox-provider";
import { readSandboxRecord } from "../../functions/providers/local/sandbox-registry";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, waitFor, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";

let runtime: LocalRuntime;
let api: ApiClient;
const GRACE_SECONDS = 2;

/** A provider whose every create fails (a broken provider, as the run sees it). */
function brokenProvider(inner: SandboxProvider): SandboxProvider {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === "type") return "modal";
      if (prop === "ensureSandbox" || prop === "createSandbox") return () => Promise.reject(new ProviderError("modal", String(prop), "modal is down (test)", { retryable: false }));
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest({
    retryIntervalScale: 0.05,
    env: {
      AUTOMATION_MIN_INTERVAL_SECONDS: "1",
      AUTOMATION_IDLE_GRACE_SECONDS: String(GRACE_SECONDS),
      RELAY_SCAN_INTERVAL_SECONDS: "0.2",
      SANDBOX_PROVIDERS: "local,modal",
    },
    provider: async (type, defaults) => (type === "modal" ? brokenProvider(await defaults("local")) : defaults(type)),
  }));
});
afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.error(runtimeDiagnostics(runtime, []));
});
afterAll(async () => {
  await runtime?.close();
});

interface Run {
  id: string;
  status: string;
  trigger: string;
  sessionId: string | null;
  summary?: string;
  error?: string;
  scheduledAt: string;
  endedAt: string | null;
}

async function create(body: Record<string, unknown>): Promise<{ id: string; webhookSecret: string; nextRunAt: string | null }> {
  const res = await api.request("POST", "/v1/automations", { body: { name: "nightly", repos: [], ...body } });
  expect(res.status, res.text).toBe(201);
  return (res.body as { automation: { id: string; webhookSecret: string; nextRunAt: string | null } }).automation;
}

async function runs(id: string): Promise<Run[]> {
  const res = await api.request("GET", `/v1/automations/${id}/runs?limit=100`);
  expect(res.status, res.text).toBe(200);
  return (res.body as { items: Run[] }).items;
}

async function disable(id: string): Promise<void> {
  const res = await api.request("PATCH", `/v1/automations/${id}`, { body: { enabled: false } });
  expect(res.status, res.text).toBe(200);
}

describe("automations on the local runtime (real OpenCode)", () => {
  it("invalid definitions are 400s naming the field and change nothing", async () => {
    const before = await api.request("GET", "/v1/automations");
    const cases: [Record<string, unknown>, string][] = [
      [{ schedule: "every 5 minutes", prompt: "hi" }, "body.schedule"],
      [{ schedule: "cron(0 9 * * MON *)", prompt: "hi" }, "body.schedule"],
      [{ schedule: "rate(10 minutes)", timezone: "Mars/Olympus", prompt: "hi" }, "body.timezone"],
      [{ schedule: "rate(1 minutes)", prompt: "hi" }, "body.schedule"],
      [{ schedule: "rate(10 minutes)", prompt: "" }, "body.prompt"],
      [{ schedule: "rate(10 minutes)", prompt: "hi", repos: [{ branch: "main" }] }, "body.repos.0.url"],
      [{ schedule: "rate(10 minutes)", prompt: "hi", provider: "e2b" }, "body.provider"],
      [{ schedule: "rate(10 minutes)", prompt: "hi", notify: { webhookUrl: "http://example.com/hook" } }, "body.notify.webhookUrl"],
    ];
    for (const [body, field] of cases) {
      const res = await api.request("POST", "/v1/automations", { body: { name: "bad", repos: [], ...body } });
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(400);
      expect((res.body as { error: { message: string } }).error.message, JSON.stringify(body)).toContain(field);
    }
    expect((await api.request("GET", "/v1/automations")).body).toEqual(before.body);
    expect(runtime.automations.timers.armed()).toEqual([]);
  });

  it("computes nextRunAt in the automation's timezone (DST included)", async () => {
    const a = await create({ schedule: "cron(30 2 ? 3 SUN#2 *)", timezone: "America/New_York", prompt: "hi", enabled: true });
    // 02:30 does not exist on the second Sunday of March in New York: the firing is at 03:00 EDT (07:00Z).
    expect(a.nextRunAt).toMatch(/^\d{4}-03-\d\dT07:00:00\.000Z$/);
    expect((await api.request("DELETE", `/v1/automations/${a.id}`)).status).toBe(204);
    expect((await api.request("GET", `/v1/automations/${a.id}`)).status).toBe(404);
    expect(runtime.automations.timers.armed()).not.toContain(a.id);
  });

  it("a rate(<n> seconds) automation fires; its run succeeds with the echo summary; its session pauses (inactivity) after the grace", async () => {
    const a = await create({ schedule: "rate(2 seconds)", prompt: "nightly report please" });
    const first = await waitFor("the first run to have a session", async () => (await runs(a.id)).find((r) => r.sessionId), 120_000);
    await disable(a.id);
    expect(first.trigger).toBe("schedule");
    // While its session runs, the agent can read the run's trigger context in its workspace (seed 003).
    const running = await waitFor(
      "the run's session to run",
      async () => {
        const s = await storedSession(runtime, first.sessionId ?? "");
        return s.status === "running" && s.sandboxId ? s : null;
      },
      120_000,
    );
    const sandbox = await readSandboxRecord(runtime.sandboxDir, running.sandboxId ?? "");
    if (!sandbox) throw new Error(`no registry record for ${running.sandboxId}`);
    const triggerContext = JSON.parse(readFileSync(join(sandbox.workspace, ".proliferate", "trigger-context.json"), "utf8")) as Record<string, unknown>;
    expect(triggerContext).toMatchObject({ automationId: a.id, runId: first.id, scheduledAt: first.scheduledAt, trigger: "schedule" });
    const done = await waitFor("the run to end", async () => (await runs(a.id)).find((r) => r.id === first.id && r.endedAt), 150_000);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.summary).toBe("echo: nightly report please");
    const session = await storedSession(runtime, first.sessionId ?? "");
    expect(session.clientType).toBe("automation");
    expect(session.triggerContext).toMatchObject({ automationId: a.id, runId: first.id, scheduledAt: first.scheduledAt });
    const paused = await waitFor(
      "the run's session to pause",
      async () => {
        const s = await storedSession(runtime, first.sessionId ?? "");
        return s.status === "paused" ? s : null;
      },
      90_000,
    );
    expect(paused.pauseReason).toBe("inactivity");
    // No sandbox left running past grace + lag: a loose bound (seed 002's 30 s budget), never a timing
    // figure (those are `npm run bench`'s, section "automations").
    const pastGraceMs = Date.parse(paused.pausedAt ?? "") - Date.parse(done.endedAt ?? "") - GRACE_SECONDS * 1000;
    expect(pastGraceMs, `run end -> session paused: grace ${GRACE_SECONDS} s + ${pastGraceMs} ms`).toBeLessThan(30_000);
  }, 300_000);

  it("a firing while the previous run is still running is skipped", async () => {
    const a = await create({ schedule: "rate(2 seconds)", prompt: "sleep 20s then report" });
    const skipped = await waitFor("a skipped run", async () => (await runs(a.id)).find((r) => r.status === "skipped"), 150_000);
    await disable(a.id);
    const all = await runs(a.id);
    const active = all.find((r) => r.status === "running" || r.status === "starting");
    expect(active, JSON.stringify(all)).toBeDefined();
    expect(skipped.error).toContain(active?.id ?? "?");
    expect(skipped.sessionId).toBeNull();
    // Newest first.
    expect(all.map((r) => r.scheduledAt)).toEqual([...all.map((r) => r.scheduledAt)].sort().reverse());
    if (active?.sessionId) await api.request("DELETE", `/v1/sessions/${active.sessionId}`);
  }, 240_000);

  it("three failed runs in a row disable the automation and its schedule", async () => {
    const a = await create({ schedule: "rate(1 second)", prompt: "hi", provider: "modal" });
    const view = await waitFor(
      "the automation to be disabled",
      async () => {
        const got = (await api.request("GET", `/v1/automations/${a.id}`)).body as { automation: { enabled: boolean; disabledReason: string | null } };
        return got.automation.enabled ? null : got.automation;
      },
      120_000,
    ).catch(async (err: unknown) => {
      const all = await runs(a.id);
      const sessions = await Promise.all(all.filter((r) => r.sessionId).map((r) => storedSession(runtime, r.sessionId ?? "")));
      throw new Error(`${(err as Error).message}; runs ${JSON.stringify(all.slice(0, 6))}; sessions ${JSON.stringify(sessions.map((s) => [s.id, s.status, s.errorMessage]))}`);
    }
    );
    expect(view.disabledReason).toContain("3 consecutive");
    const all = await runs(a.id);
    expect(all.filter((r) => r.status === "failed").length, JSON.stringify(all)).toBe(3);
    expect(all.every((r) => r.status === "failed" || r.status === "skipped")).toBe(true);
    expect(runtime.automations.timers.armed()).not.toContain(a.id);
  }, 180_000);

  it("a firing delivered twice is one run", async () => {
    const a = await create({ schedule: "cron(0 0 1 1 ? 2099)", prompt: "hi", provider: "modal" });
    const event = { kind: "fire" as const, orgId: "dev-org", automationId: a.id, scheduledAt: "2099-01-01T00:00:00.000Z" };
    const deps = runtime.automations.runDeps(runtime.deps);
    const outcomes = await Promise.all([handleAutomationFired(deps, event), handleAutomationFired(deps, event)]);
    expect(outcomes.map((o) => o.outcome).sort()).toContain("duplicate");
    expect((await runs(a.id)).length).toBe(1);
    expect(outcomes[0]?.run?.id).toBe(outcomes[1]?.run?.id);
  }, 60_000);

  it("a run past maxRunSeconds is timed_out and its session stopped", async () => {
    const a = await create({ schedule: "cron(0 0 1 1 ? 2099)", prompt: "sleep 30s then report", maxRunSeconds: 60 });
    const started = await api.request("POST", `/v1/automations/${a.id}/runs`);
    expect(started.status, started.text).toBe(202);
    const run = (started.body as { run: Run }).run;
    expect(run.trigger).toBe("manual");
    expect((await api.request("POST", `/v1/automations/${a.id}/runs`)).status).toBe(409);
    await waitFor("the session to run", async () => (await storedSession(runtime, run.sessionId ?? "")).status === "running", 120_000);
    // The run's one-time timeout schedule, delivered now (its arming at +maxRunSeconds is the scheduler's; adapter tests pin it).
    const out = await handleAutomationFired(runtime.automations.runDeps(runtime.deps), { kind: "timeout", orgId: "dev-org", automationId: a.id, runId: run.id, scheduledAt: run.scheduledAt });
    expect(out.outcome).toBe("timed_out");
    const ended = (await runs(a.id)).find((r) => r.id === run.id);
    expect(ended?.status).toBe("timed_out");
    await waitFor("the session to stop", async () => (await storedSession(runtime, run.sessionId ?? "")).status === "stopped", 60_000);
  }, 240_000);
});

describe("automations across a DATA_DIR restart", () => {
  it("an enabled automation's timer is armed again when the runtime starts; a disabled one's is not", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "automations-e2e-"));
    try {
      const first = await startRuntimeForTest({ dataDir });
      const make = async (name: string, enabled: boolean) => {
        const res = await first.api.request("POST", "/v1/automations", { body: { name, schedule: "cron(0 9 1 * ? *)", repos: [], prompt: "monthly report", enabled } });
        expect(res.status, res.text).toBe(201);
        return (res.body as { automation: { id: string } }).automation.id;
      };
      const on = await make("monthly", true);
      const off = await make("paused", false);
      expect(first.runtime.automations.timers.armed()).toEqual([on]);
      await first.runtime.close();
      const second = await startRuntimeForTest({ dataDir });
      try {
        expect(second.runtime.automations.timers.armed()).toEqual([on]);
        expect(second.runtime.automations.timers.armed()).not.toContain(off);
      } finally {
        await second.runtime.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
