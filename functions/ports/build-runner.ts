/**
 * Build runner port: starts the snapshot builder (statemachines/builds/snapshot-builder.asl.json)
 * for one build. AWS adapter: Step Functions `StartExecution` named after the build id (a
 * second start of the same build joins the first). Local adapter: the same ASL file run by
 * aws-local-stepfunctions with its Tasks bound to the same step functions.
 */
import type { BuildTarget } from "../domain/repos-prebuilds";

export interface BuildExecutionInput {
  orgId: string;
  target: BuildTarget;
  buildId: string;
}

export interface BuildRunner {
  start(input: BuildExecutionInput): Promise<{ executionName: string; started: boolean }>;
}

/** The builder's execution name: the build id (already unique, [a-z0-9_]). */
export function buildExecutionName(input: Pick<BuildExecutionInput, "buildId">): string {
  return `build-${input.buildId}`.slice(0, 80);
}
