/**
 * The local flow runner (ARCHITECTURE.md §3): the same ASL files the CDK stack deploys, executed
 * in process by aws-local-stepfunctions, with every Task bound to the same step function the
 * Lambda runs. Execution names follow the AWS adapter (`startFlowExecution`, the same decision):
 * a start whose name is taken by a running execution joins it (`started: false`) instead of
 * running the work twice; a finished one under the name makes way for the next attempt name.
 */
import "./promise-with-resolvers";
import { readFileSync, existsSync } from "node:fs";
import path from "node:path";
import { StateMachine } from "aws-local-stepfunctions";
import type { Logger } from "@aws-lambda-powertools/logger";
import { flowExecutionInput } from "../../functions/adapters/aws/sfn-flow-runner";
import type { FlowDeps } from "../../functions/flows/flow-deps";
import { FLOW_STEPS, stepArnVariable } from "../../functions/flows/steps";
import { errorForLog } from "../../functions/observability/logger";
import { FLOW_NAMES, startFlowExecution, type FlowName, type FlowRunner, type StartFlowInput, type StartFlowResult } from "../../functions/ports/flow-runner";

export const STATE_MACHINES_DIR = path.resolve(import.meta.dirname, "../../statemachines");

/** A stand-in ARN per step so the definition validates exactly as it will in AWS. */
function localArn(variable: string): string {
  return `arn:aws:lambda:us-east-1:000000000000:function:local-${variable.replace(/FunctionArn$/, "")}`;
}

interface AslState {
  Type: string;
  Resource?: string;
}

export interface LoadedFlow {
  flow: FlowName;
  definition: { States: Record<string, AslState> } & Record<string, unknown>;
  /** Task state name -> step id. */
  taskSteps: Record<string, string>;
}

/** Reads a flow's ASL file, substitutes the step ARNs and maps each Task state to its step. */
export function loadFlowDefinition(flow: FlowName, dir = STATE_MACHINES_DIR): LoadedFlow | null {
  const file = path.join(dir, `${flow}.asl.json`);
  if (!existsSync(file)) return null;
  let text = readFileSync(file, "utf8");
  const byArn = new Map<string, string>();
  for (const step of FLOW_STEPS) {
    const variable = stepArnVariable(step);
    const arn = localArn(variable);
    byArn.set(arn, step.id);
    text = text.split("${" + variable + "}").join(arn);
  }
  const unresolved = /\$\{([A-Za-z0-9]+)\}/.exec(text);
  if (unresolved) throw new Error(`${file}: substitution \${${unresolved[1]}} names no flow step`);
  const definition = JSON.parse(text) as LoadedFlow["definition"];
  const taskSteps: Record<string, string> = {};
  for (const [name, state] of Object.entries(definition.States)) {
    if (state.Type !== "Task") continue;
    const step = state.Resource ? byArn.get(state.Resource) : undefined;
    if (!step) throw new Error(`${file}: Task ${name} is not bound to a flow step`);
    taskSteps[name] = step;
  }
  return { flow, definition, taskSteps };
}

export interface LocalExecution {
  name: string;
  flow: FlowName;
  input: StartFlowInput;
  status: "running" | "succeeded" | "failed";
  output?: unknown;
  error?: string;
  done: Promise<void>;
}

/**
 * Follows a local execution to its end: `status`, `output` or `error` (logged) once `result`
 * settles, and `done` resolving then either way. The flow runner's and the build runner's.
 */
export function trackExecution(
  execution: { name: string; status: "running" | "succeeded" | "failed"; output?: unknown; error?: string; done: Promise<void> },
  result: Promise<unknown>,
  logger: Logger,
  failure: string,
): void {
  execution.done = result.then(
    (output: unknown) => {
      execution.status = "succeeded";
      execution.output = output;
    },
    (err: unknown) => {
      execution.status = "failed";
      execution.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      logger.error(failure, { execution: execution.name, error: errorForLog(err) });
    },
  );
}

export interface LocalFlowRunnerOptions {
  /** The step dependencies; a function because they include this runner. */
  deps: () => FlowDeps;
  logger: Logger;
  dir?: string;
  /** Scales every `Retry` interval (tests use 0.01 so backoff takes milliseconds, not seconds). */
  retryIntervalScale?: number;
}

export class LocalFlowRunner implements FlowRunner {
  private readonly flows = new Map<FlowName, LoadedFlow>();
  private readonly machines = new Map<FlowName, StateMachine>();
  readonly executions = new Map<string, LocalExecution>();

  constructor(private readonly options: LocalFlowRunnerOptions) {
    for (const flow of FLOW_NAMES) {
      const loaded = loadFlowDefinition(flow, options.dir);
      if (!loaded) continue;
      this.flows.set(flow, loaded);
      this.machines.set(flow, new StateMachine(loaded.definition as never));
    }
  }

  start(input: StartFlowInput): Promise<StartFlowResult> {
    try {
      return startFlowExecution(input, {
        tryStart: (name) => {
          if (this.executions.has(name)) return "exists";
          this.run(name, input);
          return "started";
        },
        isRunning: (name) => this.executions.get(name)?.status === "running",
      });
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Starts the execution under `name` (registered before this returns). */
  private run(name: string, input: StartFlowInput): void {
    const loaded = this.flows.get(input.flow);
    const machine = this.machines.get(input.flow);
    if (!loaded || !machine) throw new Error(`no state machine for flow ${input.flow} in ${this.options.dir ?? STATE_MACHINES_DIR}`);
    const deps = this.options.deps();
    const handlers = Object.fromEntries(
      Object.entries(loaded.taskSteps).map(([state, stepId]) => {
        const step = FLOW_STEPS.find((s) => s.id === stepId);
        if (!step) throw new Error(`unknown step ${stepId}`);
        const handler = step.make(deps);
        // Round-trip through JSON like a Lambda payload, so nothing works here that would not in AWS.
        return [state, async (event: unknown) => JSON.parse(JSON.stringify((await handler(event)) ?? null)) as never];
      }),
    );
    const executionInput = flowExecutionInput(input, name);
    const scale = this.options.retryIntervalScale;
    const retryIntervalOverrides = scale === undefined ? undefined : this.scaledRetries(loaded, scale);
    const run = machine.run(executionInput as never, {
      overrides: { taskResourceLocalHandlers: handlers, ...(retryIntervalOverrides ? { retryIntervalOverrides } : {}) },
      context: {
        Execution: {
          Id: `arn:aws:states:us-east-1:000000000000:execution:${input.flow}:${name}`,
          Name: name,
          Input: executionInput as never,
          StartTime: new Date().toISOString(),
        },
        StateMachine: { Id: `arn:aws:states:us-east-1:000000000000:stateMachine:${input.flow}`, Name: input.flow },
      },
    });
    const execution: LocalExecution = { name, flow: input.flow, input, status: "running", done: Promise.resolve() };
    trackExecution(execution, run.result, this.options.logger, "flow execution failed");
    this.executions.set(name, execution);
  }

  /** Resolves once no execution is running, including ones started while waiting. */
  async whenIdle(): Promise<void> {
    for (;;) {
      const running = [...this.executions.values()].filter((e) => e.status === "running");
      if (running.length === 0) return;
      await Promise.all(running.map((e) => e.done));
    }
  }

  private scaledRetries(loaded: LoadedFlow, scale: number): Record<string, number[]> {
    const out: Record<string, number[]> = {};
    for (const [name, state] of Object.entries(loaded.definition.States) as [string, AslState & { Retry?: { IntervalSeconds?: number; BackoffRate?: number; MaxAttempts?: number }[] }][]) {
      if (!state.Retry) continue;
      // One interval per retrier (the library applies it to every attempt of that retrier).
      out[name] = state.Retry.map((r) => Math.max(1, Math.round((r.IntervalSeconds ?? 1) * 1000 * scale)));
    }
    return out;
  }
}
