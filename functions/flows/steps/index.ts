/**
 * The flow step table: one source for the CDK stack (one Lambda function per step, with the
 * permissions it needs, substituted into the ASL as `${<id>FunctionArn}`) and for the local
 * flow runner (which binds each ASL Task to the same step function in process).
 */
import type { StepFactory } from "../step";
import { makeBeginStep } from "./begin";
import { makeCommitStep } from "./commit";
import { makeDiscardStep } from "./discard";
import { makeFinishStep } from "./finish";
import { makeProvisionStep } from "./provision";
import { makeQuiesceStep } from "./quiesce";
import { makeRecordFailureStep } from "./record-failure";
import { makeSnapshotStep } from "./snapshot";
import { makeTerminateStep } from "./terminate";

export interface FlowStepDefinition {
  /** Construct id and the ASL substitution stem: `${<id>FunctionArn}`. */
  id: string;
  /** Handler module, relative to the repository root (the Lambda bundle's entry). */
  entry: string;
  make: StepFactory;
  /**
   * Calls a sandbox provider or the agent inside a sandbox: provider credentials, the sandbox
   * access key (each session's SIDECAR_TOKEN and the agent password derive from it), longer timeout.
   */
  sandboxAccess: boolean;
  /** Pushes to WebSocket clients. */
  push: boolean;
  /** Arms/cancels schedules and starts flows (prompt wake-up, the circuit breaker's stop). */
  orchestrates: boolean;
  /**
   * Lambda timeout: the slowest thing the step waits for. Provision: Lambda's maximum, above the
   * boot exec's bound (BOOT_EXEC_TIMEOUT_MS) plus the create and agent calls around it.
   */
  timeoutSeconds: number;
  /** Reveals org secrets (model keys, git credentials for the sandbox): kms:Decrypt on the secrets key. */
  secretAccess?: "decrypt";
}

export const FLOW_STEPS: readonly FlowStepDefinition[] = [
  { id: "BeginStep", entry: "functions/flows/steps/begin.ts", make: makeBeginStep, sandboxAccess: false, push: true, orchestrates: false, timeoutSeconds: 30 },
  { id: "ProvisionStep", entry: "functions/flows/steps/provision.ts", make: makeProvisionStep, sandboxAccess: true, push: true, orchestrates: true, timeoutSeconds: 900, secretAccess: "decrypt" },
  { id: "QuiesceStep", entry: "functions/flows/steps/quiesce.ts", make: makeQuiesceStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 90 },
  { id: "SnapshotStep", entry: "functions/flows/steps/snapshot.ts", make: makeSnapshotStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 300 },
  { id: "TerminateStep", entry: "functions/flows/steps/terminate-handler.ts", make: makeTerminateStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 120 },
  // Commit terminates (pause, stop) and finishes the flow in the same invocation (issue 15): Terminate's and Finish's needs and time.
  { id: "CommitStep", entry: "functions/flows/steps/commit-handler.ts", make: makeCommitStep, sandboxAccess: true, push: true, orchestrates: true, timeoutSeconds: 180 },
  { id: "DiscardStep", entry: "functions/flows/steps/discard-handler.ts", make: makeDiscardStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 120 },
  { id: "RecordFailureStep", entry: "functions/flows/steps/record-failure-handler.ts", make: makeRecordFailureStep, sandboxAccess: false, push: true, orchestrates: false, timeoutSeconds: 30, secretAccess: "decrypt" },
  { id: "FinishStep", entry: "functions/flows/steps/finish-handler.ts", make: makeFinishStep, sandboxAccess: true, push: true, orchestrates: true, timeoutSeconds: 60 },
];

/** The ASL substitution variable for a step's function ARN. */
export function stepArnVariable(step: Pick<FlowStepDefinition, "id">): string {
  return `${step.id}FunctionArn`;
}
