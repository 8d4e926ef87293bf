/**
 * The build runner over Step Functions: `StartExecution` of the snapshot builder's state machine
 * (`STATE_MACHINE_ARN_SNAPSHOT_BUILDER`), named after the build, so a repeated start of one build
 * joins it (`ExecutionAlreadyExists` is not an error). The SDK loads on the first start.
 */
import type { SFNClient } from "@aws-sdk/client-sfn";
import { InternalError } from "../../domain/errors";
import { buildExecutionName, type BuildExecutionInput, type BuildRunner } from "../../ports/build-runner";
import { hasErrorName, onFirstUse, type ClientFactory } from "./sdk-client";

export const BUILD_STATE_MACHINE_ARN_ENV = "STATE_MACHINE_ARN_SNAPSHOT_BUILDER";

export class SfnBuildRunner implements BuildRunner {
  private readonly client: () => Promise<SFNClient>;

  constructor(
    client: ClientFactory<SFNClient>,
    private readonly stateMachineArn: string | undefined,
  ) {
    this.client = onFirstUse(client);
  }

  async start(input: BuildExecutionInput): Promise<{ executionName: string; started: boolean }> {
    if (!this.stateMachineArn) throw new InternalError(`${BUILD_STATE_MACHINE_ARN_ENV} is not set: cannot start the snapshot builder`, { context: { variable: BUILD_STATE_MACHINE_ARN_ENV } });
    const name = buildExecutionName(input);
    const [client, { StartExecutionCommand }] = await Promise.all([this.client(), import("@aws-sdk/client-sfn")]);
    try {
      await client.send(new StartExecutionCommand({ stateMachineArn: this.stateMachineArn, name, input: JSON.stringify({ orgId: input.orgId, target: input.target, buildId: input.buildId }) }));
      return { executionName: name, started: true };
    } catch (err) {
      if (hasErrorName(err, "ExecutionAlreadyExists")) return { executionName: name, started: false };
      throw err;
    }
  }
}
