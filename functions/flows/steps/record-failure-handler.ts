/**
 * Lambda entry of the RecordFailure step (./record-failure.ts). With automations deployed
 * (AUTOMATIONS_SCHEDULE_GROUP, set by infra/control-plane-stack.ts from the automations nested
 * stack) the step ends an automation session's run `failed` through the same
 * functions/automations/automation-runs.ts `sessionFailed` the local runtime wires in. The
 * automations' modules (Slack client, KMS, Scheduler) load on the first such session only: most
 * failures are not automation runs and keep this function's cold start.
 */
import type { Context } from "aws-lambda";
import { awsRuntime, stepMetric, withPowertools } from "../../composition/lambda";
import { processEnvironment } from "../../config/config";
import { makeRecordFailureStep } from "./record-failure";

let handle: ((event: unknown, context: Context) => Promise<unknown>) | undefined;

export const handler = (event: unknown, context: Context): Promise<unknown> => {
  if (!handle) {
    const rt = awsRuntime();
    const env = processEnvironment();
    if (env.AUTOMATIONS_SCHEDULE_GROUP) {
      let ending: Promise<(sessionId: string, message: string) => Promise<void>> | undefined;
      rt.flowDeps.automationRuns = {
        sessionFailed: async (sessionId, message) => {
          ending ??= Promise.all([import("../../automations/automation-runs"), import("../../composition/automations-aws")]).then(([runs, compose]) => {
            const automations = compose.composeAwsAutomations(rt, env);
            return (id: string, text: string) => runs.sessionFailed(automations.runDeps(rt.httpDeps), id, text);
          });
          return (await ending)(sessionId, message);
        },
      };
    }
    const step = makeRecordFailureStep(rt.flowDeps);
    handle = withPowertools(rt, (e: unknown) => step(e), stepMetric<unknown, unknown>());
  }
  return handle(event, context);
};
