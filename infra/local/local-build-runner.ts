/**
 * The local build runner: the snapshot builder's ASL file (statemachines/builds/) executed in
 * process by aws-local-stepfunctions, every Task bound to the same step function the Lambda runs
 * (functions/builds/build-steps.ts), like the lifecycle flows' runner (./local-flow-runner.ts).
 */
import "./promise-with-resolvers";
import { readFileSync } from "node:fs";
import path from "node:path";
import { StateMachine } from "aws-local-stepfunctions";
import type { Logger } from "@aws-lambda-powertools/logger";
import { BUILD_FLOW, BUILD_STEPS } from "../../functions/builds/build-steps";
import type { FlowDeps } from "../../functions/flows/flow-deps";
import { stepArnVariable } from "../../functions/flows/steps";
import { buildExecutionName, type BuildExecutionInput, type BuildRunner } from "../../functions/ports/build-runner";
import { STATE_MACHINES_DIR, trackExecution } from "./local-flow-runner";

export const BUILD_DEFINITION_PATH = path.join(STATE_MACHINES_DIR, "builds", `${BUILD_FLOW}.asl.json`);

interface AslState {
  Type: string;
  Resource?: string;
  Retry?: { IntervalSeconds?: number }[];
}

/** Reads the builder's ASL, substitutes the step ARNs and maps each Task state to its step. */
export function loadBuildDefinition(file = BUILD_DEFINITION_PATH): { definition: { States: Record<string, AslState> }; taskSteps: Record<string, string> } {
  let text = readFileSync(file, "utf8");
  const byArn = new Map<string, string>();
  for (const step of BUILD_STEPS) {
    const variable = stepArnVariable(step);
    const arn = `arn:aws:lambda:us-east-1:000000000000:function:local-${step.id}`;
    byArn.set(arn, step.id);
    text = text.split("${" + variable + "}").join(arn);
  }
  const unresolved = /\$\{([A-Za-z0-9]+)\}/.exec(text);
  if (unresolved) throw new Error(`${file}: substitution \${${unresolved[1]}} names no build step`);
  const definition = JSON.parse(text) as { States: Record<string, AslState> };
  const taskSteps: Record<string, string> = {};
  for (const [name, state] of Object.entries(definition.States)) {
    if (state.Type !== "Task") continue;
    const step = state.Resource ? byArn.get(state.Resource) : undefined;
    if (!step) throw new Error(`${file}: Task ${name} is not bound to a build step`);
    taskSteps[name] = step;
  }
  return { definition, taskSteps };
}

export interface LocalBuildExecution {
  name: string;
  input: BuildExecutionInput;
  status: "running" | "succeeded" | "failed";
  output?: unknown;
  error?: string;
  done: Promise<void>;
}

export class LocalBuildRunner implements BuildRunner {
  private readonly loaded = loadBuildDefinition();
  private readonly machine = new StateMachine(this.loaded.definition as never);
  readonly executions = new Map<string, LocalBuildExecution>();

  constructor(private readonly options: { deps: () => FlowDeps; logger: Logger; retryIntervalScale?: number }) {}

  start(input: BuildExecutionInput): Promise<{ executionName: string; started: boolean }> {
    const name = buildExecutionName(input);
    if (this.executions.has(name)) return Promise.resolve({ executionName: name, started: false });
    const deps = this.options.deps();
    const handlers = Object.fromEntries(
      Object.entries(this.loaded.taskSteps).map(([state, stepId]) => {
        const step = BUILD_STEPS.find((s) => s.id === stepId);
        if (!step) throw new Error(`unknown build step ${stepId}`);
        const handler = step.make(deps);
        // Round-trip through JSON like a Lambda payload.
        return [state, async (event: unknown) => JSON.parse(JSON.stringify((await handler(event)) ?? null)) as never];
      }),
    );
    const scale = this.options.retryIntervalScale;
    const retryIntervalOverrides =
      scale === undefined
        ? undefined
        : Object.fromEntries(
            Object.entries(this.loaded.definition.States)
              .filter(([, s]) => s.Retry)
              .map(([n, s]) => [n, (s.Retry ?? []).map((r) => Math.max(1, Math.round((r.IntervalSeconds ?? 1) * 1000 * scale)))]),
          );
    const executionInput = { orgId: input.orgId, target: input.target, buildId: input.buildId };
    const run = this.machine.run(executionInput as never, {
      overrides: { taskResourceLocalHandlers: handlers, ...(retryIntervalOverrides ? { retryIntervalOverrides } : {}) },
      context: {
        Execution: { Id: `arn:aws:states:us-east-1:000000000000:execution:${BUILD_FLOW}:${name}`, Name: name, Input: executionInput as never, StartTime: new Date().toISOString() },
        StateMachine: { Id: `arn:aws:states:us-east-1:000000000000:stateMachine:${BUILD_FLOW}`, Name: BUILD_FLOW },
      },
    });
    const execution: LocalBuildExecution = { name, input, status: "running", done: Promise.resolve() };
    trackExecution(execution, run.result, this.options.logger, "build execution failed");
    this.executions.set(name, execution);
    return Promise.resolve({ executionName: name, started: true });
  }

  /** Resolves once no build is running, including ones started while waiting. */
  async whenIdle(): Promise<void> {
    for (;;) {
      const running = [...this.executions.values()].filter((e) => e.status === "running");
      if (running.length === 0) return;
      await Promise.all(running.map((e) => e.done));
    }
  }
}
