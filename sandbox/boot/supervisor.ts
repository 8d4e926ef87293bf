/**
 * The boot process (`main.ts run`): runs phase 1, reports the outcome, starts phase 2 without
 * waiting for it, then stays alive exactly as long as OpenCode runs. It is the sandbox's
 * process-group leader for the local provider, so "leader alive" means "OpenCode alive".
 *
 * Steps: plan (pure) -> phase 1 (fail fast) -> report `ready` or `failed` -> phase 2 in the
 * background -> wait for OpenCode to exit -> stop every other child -> exit with its code.
 * `stop()` (SIGTERM) stops the children and ends the boot.
 *
 * The plan's secrets (the OpenCode password) are derived here from the sandbox key the boot took
 * from its key file (`bootSecrets`); they reach OpenCode's env and its readiness probe's headers,
 * never a log line.
 */
import { bootSecrets, planBoot, type BootPlan } from "./boot-plan";
import type { BootSpec } from "./boot-spec";
import { errorMessage, runPhase, type BootLog } from "./boot-runner";
import { ProcessTable } from "./processes";
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
}

export type ProbeFetch = (url: string, init?: { headers?: Record<string, string> }) => Promise<{ ok: boolean; status?: number }>;

const PROBE_TIMEOUT_MS = 5_000;

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

    const exit = await this.processes.waitExit("opencode");
    if (!this.stopping) log("error", "boot.exit", { reason: "opencode exited", code: exit.code, signal: exit.signal });
    await this.stop();
    return exit.code ?? 1;
  }

  /** Stops every child (idempotent). */
  stop(): Promise<void> {
    this.stopping ??= this.processes.stopAll();
    return this.stopping;
  }
}
