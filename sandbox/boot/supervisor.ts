/**
 * The boot process (`main.ts run`): runs phase 1, reports the outcome, starts phase 2 without
 * waiting for it, then stays alive as long as OpenCode runs or is being restarted. It is the sandbox's
 * process-group leader for the local provider, so "leader alive" means "OpenCode alive or
 * being restarted".
 *
 * Steps: plan (pure) -> phase 1 (fail fast) -> report `ready` or `failed` -> phase 2 in the
 * background -> supervise OpenCode (restart it with backoff when it exits; give up when it
 * keeps crashing) -> stop every other child -> exit with its last exit code.
 * `stop()` (SIGTERM) stops the children and ends the boot.
 *
 * The plan's secrets (the OpenCode password) are derived here from the sandbox key the boot took
 * from its key file (`bootSecrets`); they reach OpenCode's env and its readiness probe's headers,
 * never a log line.
 */
import { bootSecrets, planBoot, type BootPlan, type ProcessId } from "./boot-plan";
import type { BootSpec } from "./boot-spec";
import { errorMessage, runPhase, type BootLog, type StepExecutor } from "./boot-runner";
import { ProcessTable, type Exit } from "./processes";
import { createStepExecutor } from "./step-executor";

export type BootReport =
  | { type: "boot.ready"; openCodeUrl: string; phase1Ms: number }
  | { type: "boot.failed"; step: string; error: string };

export interface SupervisorDeps {
  env: NodeJS.ProcessEnv;
  /** The sandbox key (main.ts took it from its key file); only the sidecar receives it. */
  sandboxKey?: string;
  log: BootLog;
  /** Tells whoever started the boot how phase 1 ended (IPC; nothing when nobody listens). */
  report: (report: BootReport) => Promise<void> | void;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  fetch?: ProbeFetch;
  /** OpenCode restart delays (default OPENCODE_RESTART_BACKOFF_MS); tests shorten them. */
  restartBackoffMs?: readonly number[];
  /** Exits older than this no longer count towards giving up (default OPENCODE_CRASH_WINDOW_MS). */
  crashWindowMs?: number;
}

/** Delays before restarting OpenCode after its 1st, 2nd, ... exit within the window; one more exit and the boot gives up. */
export const OPENCODE_RESTART_BACKOFF_MS: readonly number[] = [1_000, 2_000, 5_000, 10_000, 30_000];
export const OPENCODE_CRASH_WINDOW_MS = 10 * 60_000;

export type ProbeFetch = (url: string, init?: { headers?: Record<string, string> }) => Promise<{ ok: boolean; status?: number }>;

/**
 * How long one boot probe (loopback: OpenCode, the sidecar, Caddy) may take before the next one
 * is tried. OpenCode answers `/session` in well under 300 ms once it listens, its instance's
 * creation included; but a request that arrives while it is still loading its config is never
 * answered (seen on about half of the local boots: `creating instance` is logged only for the
 * next request), so a probe's timeout is what such a boot waits. 5 s made those boots take
 * ~9.5 s instead of ~3 s; a probe that is only slow costs one more attempt, the server going on
 * with its work meanwhile. No longer than the backoff's cap: one hung probe costs one step.
 */
export const PROBE_TIMEOUT_MS = 1_000;

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const defaultFetch = (url: string, init?: { headers?: Record<string, string> }): Promise<{ ok: boolean; status: number }> =>
  fetch(url, { headers: init?.headers, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) }).then(async (res) => {
    await res.body?.cancel();
    return { ok: res.ok, status: res.status };
  });

export function openCodeUrlOf(spec: BootSpec): string {
  const { hostname, port } = spec.layout.opencode;
  return `http://${hostname === "0.0.0.0" ? "127.0.0.1" : hostname}:${port}`;
}

export class BootSupervisor {
  private readonly processes = new ProcessTable();
  private stopping: Promise<void> | null = null;

  constructor(
    private readonly spec: BootSpec,
    private readonly deps: SupervisorDeps,
  ) {}

  /** Resolves with the exit code the boot process should end with. */
  async run(): Promise<number> {
    const { log, report } = this.deps;
    const now = this.deps.now ?? Date.now;
    let plan: BootPlan;
    try {
      plan = planBoot(this.spec, bootSecrets(this.deps.env, this.deps.sandboxKey));
    } catch (err) {
      const error = errorMessage(err);
      log("error", "boot.failed", { step: "plan", error });
      await report({ type: "boot.failed", step: "plan", error });
      return 1;
    }
    const execute = createStepExecutor({
      env: this.deps.env,
      sandboxKey: this.deps.sandboxKey,
      processes: this.processes,
      sleep: this.deps.sleep ?? defaultSleep,
      fetch: this.deps.fetch ?? defaultFetch,
    });
    log("info", "boot.start", { sessionId: this.spec.request.sessionId, restored: this.spec.request.restored, sessionType: this.spec.request.sessionType });

    const phase1 = await runPhase(1, plan.phase1, execute, { log, now });
    if (!phase1.ok || this.stopping) {
      const failed = phase1.failed ?? { step: "phase 1", error: "stopped while booting" };
      log("error", "boot.failed", failed);
      await report({ type: "boot.failed", ...failed });
      await this.stop();
      return 1;
    }
    const openCodeUrl = openCodeUrlOf(this.spec);
    log("info", "boot.ready", { openCodeUrl, phase1Ms: phase1.durationMs });
    await report({ type: "boot.ready", openCodeUrl, phase1Ms: phase1.durationMs });

    // Fire-and-forget (seed 003 §6.4 phase 2): runPhase never throws for a failed step.
    void runPhase(2, plan.phase2, execute, { log, now }).catch((err: unknown) => log("warn", "boot.phase", { phase: 2, outcome: "failed", error: errorMessage(err) }));

    const exit = await this.superviseOpenCode(plan, execute, now);
    if (!this.stopping) log("error", "boot.exit", { reason: "opencode keeps crashing", code: exit.code, signal: exit.signal });
    await this.stop();
    return exit.code ?? 1;
  }

  /** The pid of a process the boot started, while it runs (tests, diagnostics). */
  pidOf(id: ProcessId): number | null {
    return this.processes.pidOf(id);
  }

  /**
   * Issue 25 §5: OpenCode is restarted when it exits, after OPENCODE_RESTART_BACKOFF_MS[n] for
   * the n-th exit within OPENCODE_CRASH_WINDOW_MS (its start step, then its readiness probe, as
   * phase 1 ran them). One exit more than there are delays in the window and the boot gives up:
   * it stops everything and ends, and with it the sandbox, which the control plane notices as a
   * lost sandbox (the relay's stream fails, the provider says it is gone: paused on its last
   * snapshot). Resolves with the exit that ended it (or the one in progress when stopped).
   */
  private async superviseOpenCode(plan: BootPlan, execute: StepExecutor, now: () => number): Promise<Exit> {
    const { log } = this.deps;
    const start = plan.phase1.find((s) => s.kind === "spawn" && s.process === "opencode");
    const ready = plan.phase1.find((s) => s.kind === "wait-http" && s.process === "opencode");
    const backoff = this.deps.restartBackoffMs ?? OPENCODE_RESTART_BACKOFF_MS;
    const windowMs = this.deps.crashWindowMs ?? OPENCODE_CRASH_WINDOW_MS;
    const sleep = this.deps.sleep ?? defaultSleep;
    let crashes: number[] = [];
    for (;;) {
      const exit = await this.processes.waitExit("opencode");
      if (this.stopping || !start) return exit;
      const at = now();
      crashes = [...crashes.filter((t) => at - t < windowMs), at];
      const delay = backoff[crashes.length - 1];
      if (delay === undefined) return exit;
      log("warn", "opencode.exited", { code: exit.code, signal: exit.signal, restart: crashes.length, of: backoff.length, inMs: delay });
      await sleep(delay);
      if (this.stopping) return exit;
      try {
        await execute(start);
        if (ready) await execute(ready);
        log("info", "opencode.restarted", { restart: crashes.length, pid: this.processes.pidOf("opencode") });
      } catch (err) {
        // Counted as the next exit: the process is gone (or will be stopped) either way.
        log("warn", "opencode.restart_failed", { restart: crashes.length, error: errorMessage(err) });
        if (this.processes.exitOf("opencode") === null) await this.processes.stop("opencode");
      }
    }
  }

  /** Stops every child (idempotent). */
  stop(): Promise<void> {
    this.stopping ??= this.processes.stopAll();
    return this.stopping;
  }
}
