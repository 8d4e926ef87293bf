/**
 * The snapshot builder's step table: one source for the CDK stack (one Lambda per step,
 * substituted into statemachines/builds/snapshot-builder.asl.json as `${<id>FunctionArn}`) and for
 * the local build runner (which binds each Task to the same step function in process).
 */
import type { FlowStepDefinition } from "../flows/steps";
import { makeBuildCaptureStep, makeBuildFailStep, makeBuildProvisionStep, makeBuildSetupStep, makeBuildTerminateStep } from "./builder-steps";

export const BUILD_STEPS: readonly FlowStepDefinition[] = [
  // Provision boots and clones (the boot's own bound), setup runs commands up to BUILD_COMMAND_TIMEOUT_SECONDS each: Lambda's maximum.
  { id: "BuildProvisionStep", entry: "functions/builds/entries/provision.ts", make: makeBuildProvisionStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 900 },
  { id: "BuildSetupStep", entry: "functions/builds/entries/setup.ts", make: makeBuildSetupStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 900 },
  { id: "BuildCaptureStep", entry: "functions/builds/entries/capture.ts", make: makeBuildCaptureStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 300 },
  { id: "BuildFailStep", entry: "functions/builds/entries/fail.ts", make: makeBuildFailStep, sandboxAccess: false, push: false, orchestrates: false, timeoutSeconds: 30 },
  { id: "BuildTerminateStep", entry: "functions/builds/entries/terminate.ts", make: makeBuildTerminateStep, sandboxAccess: true, push: false, orchestrates: false, timeoutSeconds: 120 },
];

export const BUILD_FLOW = "snapshot-builder";

/**
 * The build steps that derive a build sandbox's key (functions/builds/build-sandbox.ts) and so
 * read the sandbox access key: only provision, which hands the key to the sandbox. The others
 * call the provider alone (exec, snapshot, terminate).
 */
export const BUILD_KEY_HOLDERS: readonly string[] = ["BuildProvisionStep"];
