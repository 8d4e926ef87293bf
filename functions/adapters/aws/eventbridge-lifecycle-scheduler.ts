/**
 * Lifecycle scheduler over EventBridge Scheduler: one one-time `at(...)` schedule per
 * (session, purpose), named by the port's `scheduleName`, deleted by Scheduler after it fires
 * (`ActionAfterCompletion: DELETE`). Arming an existing name replaces it; cancelling an unknown
 * name is a no-op. The target is a Lambda function that receives a `ScheduleFiredEvent`. The
 * Scheduler SDK is loaded on the first call (./sdk-client.ts).
 */
import type { CreateScheduleCommandInput, SchedulerClient } from "@aws-sdk/client-scheduler";
import { scheduleName, type LifecycleScheduler, type ScheduleFiredEvent, type ScheduleTarget } from "../../ports/lifecycle-scheduler";
import { hasErrorName, onFirstUse, type ClientFactory } from "./sdk-client";

const sdk = () => import("@aws-sdk/client-scheduler");

/** An EventBridge Scheduler client, its SDK loaded by this call. */
export async function schedulerClient(): Promise<SchedulerClient> {
  return new (await sdk()).SchedulerClient({});
}

export interface EventBridgeLifecycleSchedulerOptions {
  /** Called once, on the first arm or cancel. */
  client: ClientFactory<SchedulerClient>;
  groupName: string;
  /** The Lambda function the schedule invokes. */
  targetArn: string;
  /** The role Scheduler assumes to invoke the target. */
  roleArn: string;
  /** Where Scheduler puts an invocation that failed every retry (SQS; issue 19: the Health dashboard and an alarm watch its depth). */
  deadLetterArn?: string;
  /** Clock for the past-time floor; defaults to the system clock. */
  now?: () => Date;
}

/** EventBridge rejects an `at()` in the past; anything sooner than this is armed this far out. */
const MIN_LEAD_MS = 1000;

/** Scheduler retries a failed Lambda invocation a few times, for at most an hour. */
const RETRY_POLICY = { MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 3600 };

/**
 * `at(YYYY-MM-DDThh:mm:ss)` in UTC. `at()` has whole-second precision, so the time is rounded
 * UP: a schedule may fire late, never early (an expiry must not run before its time). A time
 * sooner than `now + 1s` is armed for `now + 1s`.
 */
export function atExpression(at: Date, now: Date): string {
  const ms = Math.max(at.getTime(), now.getTime() + MIN_LEAD_MS);
  const rounded = new Date(Math.ceil(ms / 1000) * 1000);
  return `at(${rounded.toISOString().slice(0, 19)})`;
}

/**
 * For targets that wait for their exact time themselves (the idle check): the start of the
 * minute, since Scheduler invokes anywhere within the minute it is set for (one-minute
 * precision). The target then fires up to a minute early, never a minute late, and waits for
 * the time in its event. Never sooner than `now + 1s`.
 */
export function earlyAtExpression(at: Date, now: Date): string {
  const floored = Math.floor(at.getTime() / 60_000) * 60_000;
  return atExpression(new Date(Math.max(floored, now.getTime() + MIN_LEAD_MS)), now);
}

/** Purposes whose target waits for the exact time in the event (functions/idle/idle-check.ts). */
const EARLY_TOLERANT: readonly ScheduleTarget["purpose"][] = ["idle-check"];

export class EventBridgeLifecycleScheduler implements LifecycleScheduler {
  private readonly now: () => Date;
  private readonly client: () => Promise<SchedulerClient>;

  constructor(private readonly options: EventBridgeLifecycleSchedulerOptions) {
    this.now = options.now ?? (() => new Date());
    this.client = onFirstUse(options.client);
  }

  async arm(target: ScheduleTarget, at: Date): Promise<void> {
    const event: ScheduleFiredEvent = { sessionId: target.sessionId, purpose: target.purpose, at: at.toISOString() };
    const input: CreateScheduleCommandInput = {
      Name: scheduleName(target),
      GroupName: this.options.groupName,
      ScheduleExpression: EARLY_TOLERANT.includes(target.purpose) ? earlyAtExpression(at, this.now()) : atExpression(at, this.now()),
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      ActionAfterCompletion: "DELETE",
      Target: {
        Arn: this.options.targetArn,
        RoleArn: this.options.roleArn,
        Input: JSON.stringify(event),
        RetryPolicy: RETRY_POLICY,
        ...(this.options.deadLetterArn ? { DeadLetterConfig: { Arn: this.options.deadLetterArn } } : {}),
      },
    };
    await upsertSchedule(await this.client(), input);
  }

  async cancel(target: ScheduleTarget): Promise<void> {
    const [client, { DeleteScheduleCommand }] = await Promise.all([this.client(), sdk()]);
    try {
      await client.send(new DeleteScheduleCommand({ Name: scheduleName(target), GroupName: this.options.groupName }));
    } catch (err) {
      // Never armed, already fired, or already cancelled: all mean "no schedule", which is the goal.
      if (hasErrorName(err, "ResourceNotFoundException")) return;
      throw err;
    }
  }
}

/**
 * The scheduler from the environment (`SCHEDULE_GROUP_NAME`, `SCHEDULE_TARGET_ARN`,
 * `SCHEDULE_ROLE_ARN`; `SCHEDULE_DEAD_LETTER_ARN` when the stack has a dead-letter queue for them), for functions that arm schedules. A function the stack gave none of
 * these gets a scheduler whose calls fail naming what is missing.
 */
export function lifecycleSchedulerFromEnv(env: Record<string, string | undefined>, client: ClientFactory<SchedulerClient> = schedulerClient): LifecycleScheduler {
  const groupName = env.SCHEDULE_GROUP_NAME;
  const targetArn = env.SCHEDULE_TARGET_ARN;
  const roleArn = env.SCHEDULE_ROLE_ARN;
  const deadLetterArn = env.SCHEDULE_DEAD_LETTER_ARN?.trim() || undefined;
  if (groupName && targetArn && roleArn) return new EventBridgeLifecycleScheduler({ client, groupName, targetArn, roleArn, ...(deadLetterArn ? { deadLetterArn } : {}) });
  const missing = () => Promise.reject(new Error("invalid configuration: SCHEDULE_GROUP_NAME, SCHEDULE_TARGET_ARN and SCHEDULE_ROLE_ARN must be set to arm schedules"));
  return { arm: missing, cancel: missing };
}

/**
 * Creates the schedule, or replaces it when the name exists (UpdateSchedule replaces every field);
 * shared with the automations' schedules (eventbridge-automation-scheduler.ts).
 */
export async function upsertSchedule(client: SchedulerClient, input: CreateScheduleCommandInput): Promise<void> {
  const { CreateScheduleCommand, UpdateScheduleCommand } = await sdk();
  try {
    await client.send(new CreateScheduleCommand(input));
    return;
  } catch (err) {
    // The name exists: replace the schedule (re-arming: same fields, new time).
    if (!hasErrorName(err, "ConflictException")) throw err;
  }
  try {
    await client.send(new UpdateScheduleCommand(input));
  } catch (err) {
    // The old schedule fired (and was deleted) between our create and update: create afresh.
    if (!hasErrorName(err, "ResourceNotFoundException")) throw err;
    await client.send(new CreateScheduleCommand(input));
  }
}
