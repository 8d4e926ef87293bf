/**
 * Flow runner over Step Functions: `StartExecution` with the deterministic execution name from
 * the port, so a second request for the same (session, flow, generation) joins the first while it
 * runs instead of starting a duplicate; a closed execution under the name does not swallow the
 * request (`startFlowExecution`: `DescribeExecution`, then the next attempt name). The execution
 * input is deterministic too (no timestamps): Standard workflows treat an identical start of a
 * running execution as idempotent. The Step Functions SDK is loaded on the first start
 * (./sdk-client.ts).
 */
import type { SFNClient, SFNClientConfig } from "@aws-sdk/client-sfn";
import { InternalError } from "../../domain/errors";
import { FLOW_NAMES, startFlowExecution, type FlowName, type FlowRunner, type StartFlowInput, type StartFlowResult } from "../../ports/flow-runner";
import { hasErrorName, onFirstUse, type ClientFactory } from "./sdk-client";

const sdk = () => import("@aws-sdk/client-sfn");

/** A Step Functions client, its SDK loaded by this call. */
export async function sfnClient(config: SFNClientConfig = {}): Promise<SFNClient> {
  return new (await sdk()).SFNClient(config);
}

/** What every flow's state machine receives as its execution input. */
export interface FlowExecutionInput {
  sessionId: string;
  flow: FlowName;
  generation: number | string;
  actor: string;
  reason: string | null;
  /**
   * The execution's own name (the flow's lease owner), so no Pass state has to copy
   * `$$.Execution.Name` into the document (issue 15: one billed transition per flow less).
   */
  execution: string;
  /** idle-snapshot only (its Wait state reads it): the time Begin may start; the epoch when the flow need not wait. */
  notBefore?: string;
}

/** idle-snapshot's `notBefore` when the start does not ask to wait: a Wait on a past time passes at once. */
export const NO_WAIT = "1970-01-01T00:00:00Z";

/**
 * Pure and deterministic: the same request under the same execution name always yields the same
 * input (and so the same execution).
 */
export function flowExecutionInput(input: StartFlowInput, name: string): FlowExecutionInput {
  return {
    sessionId: input.sessionId,
    flow: input.flow,
    generation: input.generation,
    actor: input.actor,
    reason: input.reason ?? null,
    execution: name,
    ...(input.flow === "idle-snapshot" ? { notBefore: input.notBefore ?? NO_WAIT } : {}),
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

export class SfnFlowRunner implements FlowRunner {
  private readonly client: () => Promise<SFNClient>;

  constructor(
    client: ClientFactory<SFNClient>,
    /** Partial: flows this process never starts need no ARN (see `stateMachineArnsFromEnv`). */
    private readonly stateMachineArns: Partial<Record<FlowName, string>>,
  ) {
    this.client = onFirstUse(client);
  }

  async start(input: StartFlowInput): Promise<StartFlowResult> {
    const stateMachineArn = this.stateMachineArns[input.flow];
    if (!stateMachineArn) {
      const variable = stateMachineArnEnvName(input.flow);
      throw new InternalError(`${variable} is not set: cannot start the ${input.flow} flow`, { context: { variable, flow: input.flow } });
    }
    const [client, { StartExecutionCommand, DescribeExecutionCommand }] = await Promise.all([this.client(), sdk()]);
    return startFlowExecution(input, {
      tryStart: async (name) => {
        try {
          await client.send(new StartExecutionCommand({ stateMachineArn, name, input: JSON.stringify(flowExecutionInput(input, name)) }));
          return "started";
        } catch (err) {
          if (hasErrorName(err, "ExecutionAlreadyExists")) return "exists";
          throw err;
        }
      },
      isRunning: async (name) => {
        const out = await client.send(new DescribeExecutionCommand({ executionArn: executionArn(stateMachineArn, name) }));
        return out.status === "RUNNING";
      },
    });
  }
}

/** `arn:...:stateMachine:<machine>` + name → `arn:...:execution:<machine>:<name>`. */
export function executionArn(stateMachineArn: string, name: string): string {
  return `${stateMachineArn.replace(":stateMachine:", ":execution:")}:${name}`;
}
