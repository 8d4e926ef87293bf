/**
 * Runs boot steps in order and times each one in a structured log line (seed 003 §7
 * "Observability": latency logged at every step). Phase 1 stops at the first failure (the
 * sandbox is unusable); phase 2 logs a failure and goes on (fire-and-forget). The executor does
 * the I/O, the clock is injected, so tests assert durations without sleeping.
 */
import { redactSecrets } from "../shared/redact-secrets";
import type { BootStep } from "./boot-plan";

export type StepOutcome = { status: "ok"; detail?: Record<string, unknown> } | { status: "skipped"; reason: string };
export type StepExecutor = (step: BootStep) => Promise<StepOutcome>;

export type LogLevel = "info" | "warn" | "error";
export type BootLog = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** One JSON object per line on `write` (stdout in the sandbox); every string field is redacted. */
export function jsonLineLog(write: (line: string) => void, clock: () => number = Date.now): BootLog {
  return (level, msg, fields = {}) => {
    const entry = { time: new Date(clock()).toISOString(), level, service: "boot", msg, ...fields };
    write(`${JSON.stringify(entry, (_key, value: unknown) => (typeof value === "string" ? redactSecrets(value) : value))}\n`);
  };
}

export interface PhaseResult {
  ok: boolean;
  durationMs: number;
  /** The first failed step (phase 1 stops there). */
  failed: { step: string; error: string } | null;
}

export function errorMessage(err: unknown): string {
  return redactSecrets(err instanceof Error ? err.message : String(err));
}

export async function runPhase(
  phase: 1 | 2,
  steps: readonly BootStep[],
  execute: StepExecutor,
  deps: { log: BootLog; now: () => number },
): Promise<PhaseResult> {
  const phaseStart = deps.now();
  let failed: PhaseResult["failed"] = null;
  for (const step of steps) {
    const start = deps.now();
    try {
      const outcome = await execute(step);
      const durationMs = deps.now() - start;
      if (outcome.status === "ok") {
        deps.log("info", "boot.step", { phase, step: step.name, kind: step.kind, outcome: "ok", durationMs, ...outcome.detail });
      } else {
        deps.log("info", "boot.step", { phase, step: step.name, kind: step.kind, outcome: "skipped", durationMs, reason: outcome.reason });
      }
    } catch (err) {
      const durationMs = deps.now() - start;
      const error = errorMessage(err);
      deps.log(phase === 1 ? "error" : "warn", "boot.step", { phase, step: step.name, kind: step.kind, outcome: "failed", durationMs, error });
      failed ??= { step: step.name, error };
      if (phase === 1) break;
    }
  }
  const durationMs = deps.now() - phaseStart;
  deps.log(failed && phase === 1 ? "error" : "info", "boot.phase", { phase, outcome: failed ? "failed" : "ok", durationMs, steps: steps.length });
  return { ok: failed === null, durationMs, failed };
}
