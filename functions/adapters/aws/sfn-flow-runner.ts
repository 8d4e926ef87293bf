/**
 * Flow runner over Step Functions: `StartExecution` with the deterministic execution name from
 * the port, so a second request for the same (session, flow, generation) joins the first instead
 * of starting a duplicate. The execution input is deterministic too (no timestamps): Standard
 * workflows treat an identical start of a running execution as idempotent.
 */
import { ExecutionAlreadyExists, StartExecutionCommand, type SFNClient } from "@aws-sdk/client-sfn";
import { InternalError } from "../../domain/errors";
import { FLOW_NAMES, executionName, type FlowName, type FlowRunner, type StartFlowInput, type StartFlowResult } from "../../ports/flow-runner";

/** What every flow's state machine receives as its execution input. */
export interface FlowExecutionInput {
  sessionId: string;
  flow: FlowName;
  generation: number | string;
  actor: string;
  reason: string | null;
}

/** Pure and deterministic: the same request always yields the same input (and so the same execution). */
export function flowExecutionInput(input: StartFlowInput): FlowExecutionInput {
  return {
    sessionId: input.sessionId,
    flow: input.flow,
    generation: input.generation,
    actor: input.actor,
    reason: input.reason ?? null,
  };
}

/** `STATE_MACHINE_ARN_` + the flow name upper-cased with `-` → `_` (e.g. `STATE_MACHINE_ARN_IDLE_SNAPSHOT`). */
export function stateMachineArnEnvName(flow: FlowName): string {
  return `STATE_MACHINE_ARN_${flow.toUpperCase().replace(/-/g, "_")}`;
}

/**
 * Reads each flow's state machine ARN from the environment. A missing variable is not an error
 * here: a Lambda that starts only some flows is bound only to those ARNs, so starting a flow
 * without an ARN fails then (and only then), naming the variable.
 */
export function stateMachineArnsFromEnv(env: Record<string, string | undefined>): Partial<Record<FlowName, string>> {
  const arns: Partial<Record<FlowName, string>> = {};
  for (const flow of FLOW_NAMES) {
    const value = env[stateMachineArnEnvName(flow)]?.trim();
    if (value) arns[flow] = value;
  }
  return arns;
}

function isExecutionAlreadyExists(err: unknown): boolean {
  return err instanceof ExecutionAlreadyExists || (err as { name?: string } | null)?.name === "ExecutionAlreadyExists";
}

export class SfnFlowRunner implements FlowRunner {
  constructor(
    private readonly client: SFNClient,
    /** Partial: flows this process never starts need no ARN (see `stateMachineArnsFromEnv`). */
    private readonly stateMachineArns: Partial<Record<FlowName, string>>,
  ) {}

  async start(input: StartFlowInput): Promise<StartFlowResult> {
    const name = executionName(input);
    const stateMachineArn = this.stateMachineArns[input.flow];
    if (!stateMachineArn) {
      const variable = stateMachineArnEnvName(input.flow);
      throw new InternalError(`${variable} is not set: cannot start the ${input.flow} flow`, { context: { variable, flow: input.flow } });
    }
    try {
      await this.client.send(
        new StartExecutionCommand({ stateMachineArn, name, input: JSON.stringify(flowExecutionInput(input)) }),
      );
      return { executionName: name, started: true };
    } catch (err) {
      // The name is taken (running with other input, or already closed): the work this request
      // asks for has an execution, so the caller joins it rather than starting a duplicate.
      if (isExecutionAlreadyExists(err)) return { executionName: name, started: false };
      throw err;
    }
  }
}
