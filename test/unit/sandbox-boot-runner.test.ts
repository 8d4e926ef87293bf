/**
 * The boot runner: every step timed in one structured log line; phase 1 stops at the first
 * failure, phase 2 goes on. The clock is a counter the fake executor advances, so durations are
 * exact without sleeping.
 */
import { describe, expect, it } from "vitest";
import type { BootStep } from "../../sandbox/boot/boot-plan";
import { jsonLineLog, runPhase, type BootLog, type StepExecutor } from "../../sandbox/boot/boot-runner";

const file = (name: string): BootStep => ({ kind: "files", name, ops: [] });

interface Line {
  level: string;
  msg: string;
  [key: string]: unknown;
}

function harness(plan: Record<string, { takesMs: number; result: "ok" | "skip" | Error }>) {
  let clock = 1_000;
  const lines: Line[] = [];
  const log: BootLog = (level, msg, fields = {}) => lines.push({ level, msg, ...fields });
  const ran: string[] = [];
  const execute: StepExecutor = async (step) => {
    ran.push(step.name);
    const p = plan[step.name];
    if (!p) throw new Error(`unplanned ${step.name}`);
    clock += p.takesMs;
    if (p.result instanceof Error) throw p.result;
    return p.result === "ok" ? { status: "ok", detail: { files: 0 } } : { status: "skipped", reason: "not installed" };
  };
  return { lines, ran, execute, deps: { log, now: () => clock } };
}

describe("runPhase", () => {
  it("logs one timed line per step and a phase line", async () => {
    const h = harness({ a: { takesMs: 5, result: "ok" }, b: { takesMs: 0, result: "skip" }, c: { takesMs: 120, result: "ok" } });
    const result = await runPhase(1, [file("a"), file("b"), file("c")], h.execute, h.deps);
    expect(result).toEqual({ ok: true, durationMs: 125, failed: null });
    expect(h.lines).toEqual([
      { level: "info", msg: "boot.step", phase: 1, step: "a", kind: "files", outcome: "ok", durationMs: 5, files: 0 },
      { level: "info", msg: "boot.step", phase: 1, step: "b", kind: "files", outcome: "skipped", durationMs: 0, reason: "not installed" },
      { level: "info", msg: "boot.step", phase: 1, step: "c", kind: "files", outcome: "ok", durationMs: 120, files: 0 },
      { level: "info", msg: "boot.phase", phase: 1, outcome: "ok", durationMs: 125, steps: 3 },
    ]);
  });

  it("phase 1 stops at the first failure and reports it", async () => {
    const h = harness({ a: { takesMs: 1, result: "ok" }, b: { takesMs: 7, result: new Error("git clone exited 128") }, c: { takesMs: 1, result: "ok" } });
    const result = await runPhase(1, [file("a"), file("b"), file("c")], h.execute, h.deps);
    expect(h.ran).toEqual(["a", "b"]);
    expect(result).toMatchObject({ ok: false, failed: { step: "b", error: "git clone exited 128" } });
    expect(h.lines[1]).toEqual({ level: "error", msg: "boot.step", phase: 1, step: "b", kind: "files", outcome: "failed", durationMs: 7, error: "git clone exited 128" });
    expect(h.lines.at(-1)).toMatchObject({ level: "error", msg: "boot.phase", outcome: "failed" });
  });

  it("phase 2 is fire-and-forget: a failure is logged as a warning and the next steps still run", async () => {
    const h = harness({ a: { takesMs: 1, result: new Error("caddy could not start") }, b: { takesMs: 1, result: "ok" } });
    const result = await runPhase(2, [file("a"), file("b")], h.execute, h.deps);
    expect(h.ran).toEqual(["a", "b"]);
    expect(result).toMatchObject({ ok: false, failed: { step: "a" } });
    expect(h.lines[0]).toMatchObject({ level: "warn", outcome: "failed", error: "caddy could not start" });
    expect(h.lines[1]).toMatchObject({ step: "b", outcome: "ok" });
  });

  it("redacts secrets from step errors", async () => {
    const h = harness({ a: { takesMs: 1, result: new Error("clone https://x-access-token:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/a/b failed") } });
    const result = await runPhase(1, [file("a")], h.execute, h.deps);
    expect(JSON.stringify(h.lines)).not.toContain("ghp_abcdefghijklmnopqrstuvwxyz0123");
    expect(result.failed?.error).toContain("[REDACTED]");
  });
});

describe("jsonLineLog", () => {
  it("writes one parseable JSON object per line with time, level and service, secrets redacted", () => {
    const out: string[] = [];
    const log = jsonLineLog((line) => out.push(line), () => Date.UTC(2026, 0, 2, 3, 4, 5));
    log("warn", "boot.step", { step: "clone", error: 'token sk-ant-api03-abcdefghijklmnopqrstuvwxyz and a "quote"' });
    expect(out).toHaveLength(1);
    expect(out[0]?.endsWith("\n")).toBe(true);
    const parsed = JSON.parse(out[0] ?? "") as Record<string, unknown>;
    expect(parsed).toMatchObject({ time: "2026-01-02T03:04:05.000Z", level: "warn", service: "boot", msg: "boot.step", step: "clone" });
    expect(parsed.error).toBe('token [REDACTED] and a "quote"');
  });
});
