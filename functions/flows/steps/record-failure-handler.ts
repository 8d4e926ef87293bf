/**
 * Lambda entry of the RecordFailure step (./record-failure.ts). With automations deployed
 * (AUTOMATIONS_SCHEDULE_GROUP, set by infra/control-plane-stack.ts from the automations nested
 * stack) the step ends an automation session's run `failed` through the same
 * functions/automations/automation-runs.ts `sessionFailed` the local runtime wires in.
 */
import type { Context } from "aws-lambda";
import { sessionFailed } from "../../automations/automation-runs";
import { composeAwsAutomations } from "../../composition/automations-aws";
import { awsRuntime, stepMetric, withPowertools } from "../../composition/lambda";
import { processEnvironment } from "../../config/config";
import { makeRecordFailureStep } from "./record-failure";

let handle: ((event: unknown, context: Context) => Promise<unknown>) | undefined;

export const handler = (event: unknown, context: Context): Promise<unknown> => {
  if (!handle) {
    const rt = awsRuntime();
    const env = processEnvironment();
    if (env.AUTOMATIONS_SCHEDULE_GROUP) {
      const automations = composeAwsAutomations(rt, env);
      rt.flowDeps.automationRuns = { sessionFailed: (sessionId, message) => sessionFailed(automations.runDeps(rt.httpDeps), sessionId, message) };
    }
    const step = makeRecordFailureStep(rt.flowDeps);
    handle = withPowertools(rt, (e: unknown) => step(e), stepMetric<unknown, unknown>());
  }
  return handle(event, context);
};
