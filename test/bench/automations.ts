/**
 * Section: automations (issue 18). Over the local runtime with a zero-latency provider
 * (InstantSandboxProvider), each automation fired through the same `automation-fired` handler
 * EventBridge Scheduler invokes in AWS:
 * - firing -> session created (the run's session record written) and firing -> handler done
 *   (run recorded, session created and its ensure-runtime started), p50 / p99;
 * - AWS calls per run: DynamoDB requests of the firing and of the run's end (counted on the
 *   runtime's document client), Scheduler calls (the run's timeout: one create, one delete),
 *   Lambda invocations (automation-fired), and the skip path;
 * - run end -> session paused past the grace (issue 18: "no run leaves a sandbox running past
 *   grace + lag"): BENCH_AUTOMATION_RUNS (default 5) manual runs, one after another, on the local
 *   runtime with the real local provider (real OpenCode, the development model's echo) and a short
 *   automation grace (BENCH_AUTOMATION_GRACE_SECONDS, default 2): from the run's `endedAt` (its
 *   turn completed) to its session's `pausedAt` (idle snapshot, reason inactivity), less the
 *   grace, p50 / p99 / max. Figures only.
 */
import { endRun, handleAutomationFired } from "../../functions/automations/automation-runs";
import { startLocalRuntime } from "../../infra/local/runtime";
import { apiClient, storedSession, waitFor } from "../support/local-runtime";
import { InstantSandboxProvider } from "../support/instant-provider";
import { countDynamoRequests, type DynamoRequest } from "./dynamo-usage";
import { heading, note, percentile, table } from "./report";

export async function benchAutomations(): Promise<void> {
  heading("Automations (issue 18): firing -> session created, AWS calls per run");
  const RUNS = 20;
  const runtime = await startLocalRuntime({ port: 0, provider: async () => new InstantSandboxProvider({ type: "local" }), env: { AUTOMATION_MIN_INTERVAL_SECONDS: "1", RELAY_SCAN_INTERVAL_SECONDS: "3600" } });
  try {
    const api = apiClient(runtime.url, runtime.devApiToken);
    const deps = runtime.automations.runDeps(runtime.deps);
    let requests: DynamoRequest[] = [];
    countDynamoRequests((runtime.automations.store as unknown as { doc: unknown }).doc, (r) => requests.push(r));
    let schedulerCalls = 0;
    const timers = runtime.automations.scheduler;
    const armTimeout = timers.armTimeout.bind(timers);
    const cancelTimeout = timers.cancelTimeout.bind(timers);
    timers.armTimeout = (run, at) => (schedulerCalls++, armTimeout(run, at));
    timers.cancelTimeout = (run) => (schedulerCalls++, cancelTimeout(run));

    const toCreated: number[] = [];
    const toDone: number[] = [];
    const firingRequests: number[] = [];
    const firingWrites: number[] = [];
    const endRequests: number[] = [];
    const scheduler: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const res = await api.request("POST", "/v1/automations", { body: { name: `bench ${i}`, schedule: "cron(0 0 1 1 ? 2099)", repos: [], prompt: "report" } });
      const id = (res.body as { automation: { id: string } }).automation.id;
      await runtime.flows.whenIdle();
      requests = [];
      schedulerCalls = 0;
      const t0 = performance.now();
      const scheduledAt = new Date().toISOString();
      const out = await handleAutomationFired(deps, { kind: "fire", orgId: "dev-org", automationId: id, scheduledAt });
      toDone.push(performance.now() - t0);
      const session = await runtime.deps.sessions.getSession(out.run?.sessionId ?? "");
      toCreated.push(Date.parse(session?.createdAt ?? "") - Date.parse(scheduledAt));
      firingRequests.push(requests.length);
      firingWrites.push(requests.filter((r) => r.wru > 0).length);
      scheduler.push(schedulerCalls);
      await runtime.flows.whenIdle();
      // A run's end, on a run still active (the zero-latency sandbox has no agent to finish it).
      const active = { ...(out.run ?? (undefined as never)), id: `${out.run?.id ?? "run"}x`, status: "running" as const, sessionId: out.run?.sessionId ?? null };
      await runtime.automations.store.putRun(active);
      await runtime.automations.store.setActiveRun("dev-org", id, { runId: active.id, scheduledAt: active.scheduledAt });
      requests = [];
      schedulerCalls = 0;
      await endRun(deps, active, "succeeded", { summary: "done" });
      endRequests.push(requests.length);
      scheduler[scheduler.length - 1] = (scheduler.at(-1) ?? 0) + schedulerCalls;
    }
    // The skip path: a firing while a run is active.
    const res = await api.request("POST", "/v1/automations", { body: { name: "bench skip", schedule: "cron(0 0 1 1 ? 2099)", repos: [], prompt: "report" } });
    const id = (res.body as { automation: { id: string } }).automation.id;
    const at = new Date().toISOString();
    // An active run without a session yet (`starting`): the next firing is skipped.
    await runtime.automations.store.putRun({ id: "run_bench_active", automationId: id, orgId: "dev-org", trigger: "schedule", status: "starting", scheduledAt: at, startedAt: at, endedAt: null, sessionId: null, summary: null, error: null });
    await runtime.automations.store.setActiveRun("dev-org", id, { runId: "run_bench_active", scheduledAt: at });
    requests = [];
    await handleAutomationFired(deps, { kind: "fire", orgId: "dev-org", automationId: id, scheduledAt: new Date(Date.now() + 1000).toISOString() });
    const skipRequests = requests.length;
    const skipped = (await runtime.automations.store.listRuns(id, { limit: 5 })).items.filter((r) => r.status === "skipped").length;

    table(
      ["figure", "p50", "p99"],
      [
        ["firing -> session created (ms, record's createdAt, ms precision)", percentile(toCreated, 50), percentile(toCreated, 99)],
        ["firing -> handler done (ms: run, session, resume started)", percentile(toDone, 50).toFixed(1), percentile(toDone, 99).toFixed(1)],
      ],
    );
    table(
      ["AWS calls per run", "count"],
      [
        ["DynamoDB requests, firing (run put, session create, resume)", percentile(firingRequests, 50)],
        ["  of which writes", percentile(firingWrites, 50)],
        ["DynamoDB requests, run end (run, current run, streak)", percentile(endRequests, 50)],
        ["Scheduler calls (timeout create + delete)", percentile(scheduler, 50)],
        ["Lambda invocations (automation-fired; + the flows' own)", 1],
        [`DynamoDB requests, a skipped firing (${skipped} skipped)`, skipRequests],
      ],
    );
    note(`${RUNS} runs, zero-latency provider (InstantSandboxProvider), local runtime on dynalite; the session's flows (ensure-runtime) are counted in section "lifecycle flows".`);
  } finally {
    await runtime.close();
  }
}

/** Seed 002's idle detection polled every 30 s: a finished run's sandbox idled up to 30 s past its grace. */
const SEED_POLL_SECONDS = 30;

export async function benchAutomationIdleGrace(): Promise<void> {
  heading("Automations (issue 18): run end -> session paused, past the automation grace");
  const runs = Number(process.env.BENCH_AUTOMATION_RUNS ?? 5);
  const graceSeconds = Number(process.env.BENCH_AUTOMATION_GRACE_SECONDS ?? 2);
  const runtime = await startLocalRuntime({ port: 0, env: { AUTOMATION_MIN_INTERVAL_SECONDS: "1", AUTOMATION_IDLE_GRACE_SECONDS: String(graceSeconds), RELAY_SCAN_INTERVAL_SECONDS: "0.2" } });
  try {
    const api = apiClient(runtime.url, runtime.devApiToken);
    const pastGrace: number[] = [];
    for (let i = 0; i < runs; i++) {
      const res = await api.request("POST", "/v1/automations", { body: { name: `grace ${i}`, schedule: "cron(0 0 1 1 ? 2099)", repos: [], prompt: `report ${i}` } });
      if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`);
      const id = (res.body as { automation: { id: string } }).automation.id;
      const started = await api.request("POST", `/v1/automations/${id}/runs`);
      if (started.status !== 202) throw new Error(`run: ${started.status} ${started.text}`);
      const run = (started.body as { run: { id: string; scheduledAt: string; sessionId: string } }).run;
      const ended = await waitFor(
        `run ${run.id} to end`,
        async () => {
          const r = await runtime.automations.store.getRun(id, run.scheduledAt, run.id);
          return r?.endedAt ? r : null;
        },
        180_000,
      );
      if (ended.status !== "succeeded") throw new Error(`run ${run.id} ended ${ended.status}: ${ended.error ?? ""}`);
      const paused = await waitFor(
        `session ${run.sessionId} to pause`,
        async () => {
          const session = await storedSession(runtime, run.sessionId);
          return session.status === "paused" ? session : null;
        },
        120_000,
      );
      pastGrace.push(Date.parse(paused.pausedAt ?? "") - Date.parse(ended.endedAt ?? "") - graceSeconds * 1000);
    }
    table(
      ["run end -> session paused, less the grace (ms)", "p50", "p99", "max", "seed 002"],
      [[`${runs} runs, grace ${graceSeconds} s`, percentile(pastGrace, 50), percentile(pastGrace, 99), Math.max(...pastGrace), `up to ${SEED_POLL_SECONDS * 1000} (its ${SEED_POLL_SECONDS} s poll)`]],
    );
    note("Real OpenCode (the development model's echo) on the local provider, one run at a time; pausedAt is the idle snapshot's commit (the sandbox is down by then). AWS adds Scheduler's delivery of the idle check (up to a minute early, held by the flow's Wait) and Lambda cold starts.");
  } finally {
    await runtime.close();
  }
}
