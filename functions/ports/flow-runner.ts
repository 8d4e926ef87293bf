/**
 * Flow runner port: starts a lifecycle flow (Step Functions state machine) for a session.
 * AWS adapter: `StartExecution` with a deterministic execution name per
 * (session, operation, generation), so a second request for the same work joins the running
 * execution instead of starting a duplicate. Local adapter: the same ASL files executed by
 * aws-local-stepfunctions with Task states bound to the same step handlers.
 */
import { InternalError } from "../domain/errors";

export const FLOW_NAMES = ["ensure-runtime", "pause", "snapshot", "stop", "migrate", "idle-snapshot"] as const;
export type FlowName = (typeof FLOW_NAMES)[number];

export interface StartFlowInput {
  flow: FlowName;
  sessionId: string;
  /** Distinguishes successive runs of the same operation (e.g. the session version it acts on). */
  generation: number | string;
  /** Who asked: "user", "schedule:expiry", "relay", ... (recorded in the audit trail). */
  actor: string;
  reason?: string;
  /**
   * idle-snapshot only: the flow's first state (a Step Functions Wait, which costs one state
   * transition and no compute) waits until this ISO time before Begin. An idle check delivered
   * early (EventBridge Scheduler's one-minute precision) starts the flow at once with its exact
   * time here, instead of sleeping in the Lambda (issue 15). Absent: no wait.
   */
  notBefore?: string;
}

export interface StartFlowResult {
  executionName: string;
  /** False when an execution with the same name was already running and this call joined it. */
  started: boolean;
}

export interface FlowRunner {
  start(input: StartFlowInput): Promise<StartFlowResult>;
}

/** Execution names: [A-Za-z0-9-_], max 80 characters (Step Functions limit). */
export function executionName(input: Pick<StartFlowInput, "flow" | "sessionId" | "generation">): string {
  return `${input.flow}-${input.sessionId}-${input.generation}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 80);
}

/** How many executions one (session, flow, generation) may have before starting is refused. */
export const MAX_EXECUTION_ATTEMPTS = 20;

/**
 * The name of the `attempt`-th execution for a request: attempt 0 is `executionName`, later
 * attempts add `-r<n>` (the base shortened so the whole stays within 80 characters).
 */
export function executionAttemptName(input: Pick<StartFlowInput, "flow" | "sessionId" | "generation">, attempt: number): string {
  const base = executionName(input);
  if (attempt === 0) return base;
  const suffix = `-r${attempt}`;
  return `${base.slice(0, 80 - suffix.length)}${suffix}`;
}

/** What a runner's backend says about one execution name. */
export interface ExecutionBackend {
  /**
   * Starts an execution under `name`; `"exists"` when the name is already taken (running or
   * closed). An in-process backend may answer synchronously (no extra turns of the event loop).
   */
  tryStart(name: string): "started" | "exists" | Promise<"started" | "exists">;
  /** Whether the execution under a taken name is still running. */
  isRunning(name: string): boolean | Promise<boolean>;
}

/**
 * The one start decision every flow runner makes (Step Functions and local alike). A request
 * whose name is taken by a RUNNING execution joins it: that execution does the work. A closed
 * execution under the name (succeeded, failed, timed out, aborted) must not swallow the request:
 * a flow that gave up (Begin out of LeaseBusy retries ends SUCCEEDED through Finish, without its
 * effect) would otherwise turn every later request at the same generation into a silent no-op
 * until something bumped the fence. So the next attempt name is tried; each flow re-checks the
 * session under its lease, so an extra execution after a successful one changes nothing.
 */
export function startFlowExecution(input: StartFlowInput, backend: ExecutionBackend, attempt = 0): Promise<StartFlowResult> {
  if (attempt >= MAX_EXECUTION_ATTEMPTS) {
    return Promise.reject(
      new InternalError(`${executionName(input)}: ${MAX_EXECUTION_ATTEMPTS} executions already ran for this generation; refusing to start another`, {
        context: { flow: input.flow, sessionId: input.sessionId },
      }),
    );
  }
  const name = executionAttemptName(input, attempt);
  const decide = (outcome: "started" | "exists"): StartFlowResult | Promise<StartFlowResult> =>
    outcome === "started"
      ? { executionName: name, started: true }
      : Promise.resolve(backend.isRunning(name)).then((running) => (running ? { executionName: name, started: false } : startFlowExecution(input, backend, attempt + 1)));
  const outcome = backend.tryStart(name);
  return typeof outcome === "string" ? Promise.resolve(decide(outcome)) : outcome.then(decide);
}
