/**
 * Lambda entry of the RecordFailure step (./record-failure.ts). With automations deployed
 * (AUTOMATIONS_SCHEDULE_GROUP, set by infra/control-plane-stack.ts from the automations nested
 * stack) the step ends an automation session's run `failed` through the same
 * functions/automations/automation-runs.ts `sessionFailed` the local runtime wires in. The
 * automations' modules (Slack client, KMS, Scheduler) load on the first such session only: most
 * failures are not automation runs and keep this function's cold start. The run's notifications
 * are awaited before the step returns (settle-notifications.ts).
 */
import type { Context } from "aws-lambda";
import { awsRuntime, stepMetric, withPowertools } from "../../composition/lambda";
import { processEnvironment } from "../../config/config";
import { makeRecordFailureStep } from "./record-failure";
import type { AutomationComposition } from "../../composition/automations";
import { settlingNotifications } from "../../automations/settle-notifications";

let handle: ((event: unknown, context: Context) => Promise<unknown>) | undefined;

export const handler = (event: unknown, context: Context): Promise<unknown> => {
  if (!handle) {
    const rt = awsRuntime();
    const env = processEnvironment();
    // The automations' composition once built: its notifier's posts are awaited before returning.
    let automations: AutomationComposition | undefined;
    if (env.AUTOMATIONS_SCHEDULE_GROUP) {
      let ending: Promise<(sessionId: string, message: string) => Promise<void>> | undefined;
      rt.flowDeps.automationRuns = {
        sessionFailed: async (sessionId, message) => {
          ending ??= Promise.all([import("../../automations/automation-runs"), import("../../composition/automations-aws")]).then(([runs, compose]) => {
            const composed = compose.composeAwsAutomations(rt, env);
            automations = composed;
            return (id: string, text: string) => runs.sessionFailed(composed.runDeps(rt.httpDeps), id, text);
          });
          return (await ending)(sessionId, message);
        },
      };
    }
    const step = makeRecordFailureStep(rt.flowDeps);
    handle = withPowertools(rt, settlingNotifications((e: unknown) => step(e), () => automations?.notifier), stepMetric<unknown, unknown>());
  }
  return handle(event, context);
};
