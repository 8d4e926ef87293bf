/**
 * Automation schedules on EventBridge Scheduler (API.md "Automations"; ARCHITECTURE.md §9): one
 * recurring schedule per automation in the automations group (`<stack>-automations`), with the
 * automation's own `rate()`/`cron()` and `ScheduleExpressionTimezone`, the flexible window off,
 * `State` ENABLED or DISABLED as the definition says; and one one-time `at()` timeout schedule
 * per run (deleted by Scheduler after it fires). Both target the one `automation-fired` function;
 * the recurring one puts Scheduler's own `<aws.scheduler.scheduled-time>` in the payload, so a
 * retried delivery names the same firing (the run's dedupe key).
 */
import type { CreateScheduleCommandInput, SchedulerClient } from "@aws-sdk/client-scheduler";
import type { AutomationRecord, RunRecord } from "../../automations/automation";
import { automationScheduleName, runTimeoutScheduleName, type AutomationScheduler } from "../../ports/automations";
import { atExpression, upsertSchedule } from "./eventbridge-lifecycle-scheduler";
import { hasErrorName, onFirstUse, type ClientFactory } from "./sdk-client";

const sdk = () => import("@aws-sdk/client-scheduler");

export interface EventBridgeAutomationSchedulerOptions {
  client: ClientFactory<SchedulerClient>;
  groupName: string;
  /** The automation-fired function. */
  targetArn: string;
  /** The role Scheduler assumes to invoke it. */
  roleArn: string;
  now?: () => Date;
}

/** Scheduler retries a failed invocation; a firing older than 15 minutes is not worth a run. */
const RETRY_POLICY = { MaximumRetryAttempts: 5, MaximumEventAgeInSeconds: 900 };

export class EventBridgeAutomationScheduler implements AutomationScheduler {
  private readonly client: () => Promise<SchedulerClient>;
  private readonly now: () => Date;

  constructor(private readonly options: EventBridgeAutomationSchedulerOptions) {
    this.client = onFirstUse(options.client);
    this.now = options.now ?? (() => new Date());
  }

  private async upsert(input: CreateScheduleCommandInput): Promise<void> {
    await upsertSchedule(await this.client(), input);
  }

  private async delete(name: string): Promise<void> {
    const [client, { DeleteScheduleCommand }] = await Promise.all([this.client(), sdk()]);
    try {
      await client.send(new DeleteScheduleCommand({ Name: name, GroupName: this.options.groupName }));
    } catch (err) {
      if (!hasErrorName(err, "ResourceNotFoundException")) throw err;
    }
  }

  async put(automation: AutomationRecord): Promise<void> {
    const input = JSON.stringify({ kind: "fire", orgId: automation.orgId, automationId: automation.id, scheduledAt: "<aws.scheduler.scheduled-time>" });
    await this.upsert({
      Name: automationScheduleName(automation.id),
      GroupName: this.options.groupName,
      ScheduleExpression: automation.schedule,
      ScheduleExpressionTimezone: automation.timezone,
      FlexibleTimeWindow: { Mode: "OFF" },
      State: automation.enabled ? "ENABLED" : "DISABLED",
      Description: `automation ${automation.id} (${automation.orgId})`.slice(0, 512),
      Target: { Arn: this.options.targetArn, RoleArn: this.options.roleArn, Input: input, RetryPolicy: RETRY_POLICY },
    });
  }

  async remove(automation: Pick<AutomationRecord, "id" | "orgId">): Promise<void> {
    await this.delete(automationScheduleName(automation.id));
  }

  async armTimeout(run: Pick<RunRecord, "id" | "automationId" | "orgId" | "scheduledAt">, at: Date): Promise<void> {
    const input = JSON.stringify({ kind: "timeout", orgId: run.orgId, automationId: run.automationId, runId: run.id, scheduledAt: run.scheduledAt });
    await this.upsert({
      Name: runTimeoutScheduleName(run.id),
      GroupName: this.options.groupName,
      ScheduleExpression: atExpression(at, this.now()),
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      ActionAfterCompletion: "DELETE",
      Target: { Arn: this.options.targetArn, RoleArn: this.options.roleArn, Input: input, RetryPolicy: RETRY_POLICY },
    });
  }

  async cancelTimeout(run: Pick<RunRecord, "id">): Promise<void> {
    await this.delete(runTimeoutScheduleName(run.id));
  }
}

/**
 * The automation scheduler from the environment (`AUTOMATIONS_SCHEDULE_GROUP`,
 * `AUTOMATION_FIRED_ARN`, `AUTOMATIONS_SCHEDULER_ROLE_ARN`, set by infra/automations-stack.ts).
 * A function given none of them gets a scheduler whose calls fail naming what is missing.
 */
export function automationSchedulerFromEnv(env: Readonly<Record<string, string | undefined>>, client: ClientFactory<SchedulerClient>): AutomationScheduler {
  const groupName = env.AUTOMATIONS_SCHEDULE_GROUP;
  const targetArn = env.AUTOMATION_FIRED_ARN;
  const roleArn = env.AUTOMATIONS_SCHEDULER_ROLE_ARN;
  if (groupName && targetArn && roleArn) return new EventBridgeAutomationScheduler({ client, groupName, targetArn, roleArn });
  const missing = () => Promise.reject(new Error("invalid configuration: AUTOMATIONS_SCHEDULE_GROUP, AUTOMATION_FIRED_ARN and AUTOMATIONS_SCHEDULER_ROLE_ARN must be set to schedule automations"));
  return { put: missing, remove: missing, armTimeout: missing, cancelTimeout: missing };
}
