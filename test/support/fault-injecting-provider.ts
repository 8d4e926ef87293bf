/**
 * A `SandboxProvider` wrapper for failure and race tests: it records every call and applies
 * per-operation fault plans around the real (or instant) provider it wraps. Within one call the
 * plan applies in this order: record → hold ("before") → delay → failNext (the inner operation
 * does not run) → inner operation → crashAfter (it did run) → hold ("after") → result.
 * Capability flags and `execCommand` (when the inner provider has it) pass through.
 */
import { ProviderError } from "../../functions/domain/errors";
import type { ProviderType } from "../../functions/domain/session";
import type {
  CreateSandboxOpts,
  CreateSandboxResult,
  EnsureSandboxResult,
  ListedSandbox,
  PauseResult,
  SandboxProvider,
  SnapshotResult,
  SandboxTunnels,
} from "../../functions/ports/sandbox-provider";

export type ProviderOperation =
  | "ensureSandbox"
  | "createSandbox"
  | "snapshot"
  | "pause"
  | "memorySnapshot"
  | "deleteSnapshot"
  | "terminate"
  | "checkSandboxes"
  | "listSandboxes"
  | "health"
  | "resolveTunnels"
  | "execCommand";

export interface ProviderCall {
  op: ProviderOperation;
  args: unknown[];
  /** When the call arrived (the wrapper's clock), before any fault applied. */
  at: number;
}

/** A paused call: `reached` resolves when a call arrives at the hold point; it continues on `release()`. */
export interface HeldCall {
  reached: Promise<void>;
  release(): void;
}

export interface FaultInjectingProviderOptions {
  now?: () => number;
}

interface Hold {
  arrive(): void;
  released: Promise<void>;
}

interface Plan {
  failures: { error: Error; remaining: number }[];
  delayMs: number;
  holdsBefore: Hold[];
  holdsAfter: Hold[];
  crashes: number;
}

export class FaultInjectingProvider implements SandboxProvider {
  readonly calls: ProviderCall[] = [];
  declare readonly execCommand?: SandboxProvider["execCommand"];

  private readonly plans = new Map<ProviderOperation, Plan>();
  private readonly now: () => number;

  constructor(
    readonly inner: SandboxProvider,
    options: FaultInjectingProviderOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    const exec = inner.execCommand?.bind(inner);
    if (exec) {
      this.execCommand = (sandboxId, argv, opts) => this.run("execCommand", [sandboxId, argv, opts], () => exec(sandboxId, argv, opts));
    }
  }

  get type(): ProviderType {
    return this.inner.type;
  }
  get supportsPause(): boolean {
    return this.inner.supportsPause;
  }
  get supportsAutoPause(): boolean {
    return this.inner.supportsAutoPause;
  }
  get supportsMemorySnapshot(): boolean {
    return this.inner.supportsMemorySnapshot;
  }
  keepsProcesses(snapshotId: string | null | undefined): boolean {
    return this.inner.keepsProcesses?.(snapshotId) ?? false;
  }

  /** The next `times` calls of `op` throw `error` without reaching the inner provider; plans queue in order. */
  failNext(op: ProviderOperation, error: Error, times = 1): this {
    this.plan(op).failures.push({ error, remaining: times });
    return this;
  }

  /** Every later call of `op` waits `ms` first (real time); `delay(op, 0)` removes it. */
  delay(op: ProviderOperation, ms: number): this {
    this.plan(op).delayMs = ms;
    return this;
  }

  /**
   * The next call of `op` blocks until released: before the inner operation ("before", the
   * default) or after its side effect, with the result held back ("after"). Holds queue: each
   * call takes one. Releasing before the call arrives lets it pass without blocking.
   */
  hold(op: ProviderOperation, when: "before" | "after" = "before"): HeldCall {
    const reached = deferred();
    const released = deferred();
    const plan = this.plan(op);
    (when === "before" ? plan.holdsBefore : plan.holdsAfter).push({ arrive: reached.resolve, released: released.promise });
    return { reached: reached.promise, release: released.resolve };
  }

  /** The next `times` calls of `op` run the inner operation, then throw a non-retryable ProviderError (the worker died after the side effect). */
  crashAfter(op: ProviderOperation, times = 1): this {
    this.plan(op).crashes += times;
    return this;
  }

  /** Drops the fault plan of `op`, or of every operation; pending holds stay blocked until released. */
  clear(op?: ProviderOperation): this {
    if (op) this.plans.delete(op);
    else this.plans.clear();
    return this;
  }

  callsOf(op: ProviderOperation): ProviderCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  ensureSandbox(opts: CreateSandboxOpts): Promise<EnsureSandboxResult> {
    return this.run("ensureSandbox", [opts], () => this.inner.ensureSandbox(opts));
  }

  createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult> {
    return this.run("createSandbox", [opts], () => this.inner.createSandbox(opts));
  }

  snapshot(sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    return this.run("snapshot", [sessionId, sandboxId], () => this.inner.snapshot(sessionId, sandboxId));
  }

  pause(sessionId: string, sandboxId: string): Promise<PauseResult> {
    return this.run("pause", [sessionId, sandboxId], () => this.inner.pause(sessionId, sandboxId));
  }

  memorySnapshot(sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    return this.run("memorySnapshot", [sessionId, sandboxId], () => this.inner.memorySnapshot(sessionId, sandboxId));
  }

  deleteSnapshot(snapshotId: string): Promise<void> {
    return this.run("deleteSnapshot", [snapshotId], () => this.inner.deleteSnapshot(snapshotId));
  }

  terminate(sessionId: string, sandboxId?: string | null): Promise<void> {
    return this.run("terminate", [sessionId, sandboxId], () => this.inner.terminate(sessionId, sandboxId));
  }

  checkSandboxes(sandboxIds: string[]): Promise<string[]> {
    return this.run("checkSandboxes", [sandboxIds], () => this.inner.checkSandboxes(sandboxIds));
  }

  listSandboxes(): Promise<ListedSandbox[]> {
    return this.run("listSandboxes", [], () => this.inner.listSandboxes());
  }

  health(): Promise<boolean> {
    return this.run("health", [], () => this.inner.health());
  }

  resolveTunnels(sandboxId: string): Promise<SandboxTunnels> {
    return this.run("resolveTunnels", [sandboxId], () => this.inner.resolveTunnels(sandboxId));
  }

  private plan(op: ProviderOperation): Plan {
    let plan = this.plans.get(op);
    if (!plan) {
      plan = { failures: [], delayMs: 0, holdsBefore: [], holdsAfter: [], crashes: 0 };
      this.plans.set(op, plan);
    }
    return plan;
  }

  /** The plan is read afresh at each step, so a test may change it while a call is held. */
  private async run<T>(op: ProviderOperation, args: unknown[], invoke: () => Promise<T>): Promise<T> {
    this.calls.push({ op, args, at: this.now() });
    await passHold(this.plans.get(op)?.holdsBefore.shift());
    const delayMs = this.plans.get(op)?.delayMs ?? 0;
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));

    const failures = this.plans.get(op)?.failures ?? [];
    const failure = failures[0];
    if (failure) {
      failure.remaining -= 1;
      if (failure.remaining <= 0) failures.shift();
      throw failure.error;
    }

    const result = await invoke();
    const plan = this.plans.get(op);
    if (plan && plan.crashes > 0) {
      plan.crashes -= 1;
      throw new ProviderError(this.inner.type, op, "the worker crashed after the operation took effect (injected)", {
        retryable: false,
        context: { injected: "crashAfter" },
      });
    }
    await passHold(this.plans.get(op)?.holdsAfter.shift());
    return result;
  }
}

async function passHold(hold: Hold | undefined): Promise<void> {
  if (!hold) return;
  hold.arrive();
  await hold.released;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
