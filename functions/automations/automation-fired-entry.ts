/**
 * Lambda entry of `automation-fired` (infra/automations-stack.ts): the target of every
 * automation's EventBridge Scheduler schedule (`kind: "fire"`, with Scheduler's
 * `<aws.scheduler.scheduled-time>`) and of each run's one-time timeout schedule
 * (`kind: "timeout"`). The body is automation-runs.ts `handleAutomationFired`, which the local
 * runtime's timers call too. A thrown error makes Scheduler retry (its RetryPolicy); the run's
 * conditional put makes the retry the same run. The run-end notifications it fired are awaited
 * before it returns (settle-notifications.ts).
 */
import type { Context } from "aws-lambda";
import { awsRuntime, stepMetric, withPowertools } from "../composition/lambda";
import { composeAwsAutomations } from "../composition/automations-aws";
import { processEnvironment } from "../config/config";
import { AutomationFiredEvent } from "../ports/automations";
import { handleAutomationFired } from "./automation-runs";
import { settlingNotifications } from "./settle-notifications";

let handle: ((event: unknown, context: Context) => Promise<unknown>) | undefined;

export const handler = (event: unknown, context: Context): Promise<unknown> => {
  if (!handle) {
    const rt = awsRuntime();
    const automations = composeAwsAutomations(rt, processEnvironment());
    const fired = (e: unknown) => handleAutomationFired(automations.runDeps(rt.httpDeps), AutomationFiredEvent.parse(e));
    handle = withPowertools(rt, settlingNotifications(fired, () => automations.notifier), stepMetric<unknown, unknown>());
  }
  return handle(event, context);
};
