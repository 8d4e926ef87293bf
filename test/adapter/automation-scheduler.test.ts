/**
 * The automations' EventBridge Scheduler adapter (functions/adapters/aws/eventbridge-automation-
 * scheduler.ts) at its SDK surface (aws-sdk-client-mock): the exact calls for create, update,
 * disable and delete with the definition, and a run's one-time timeout.
 */
import { CreateScheduleCommand, DeleteScheduleCommand, SchedulerClient, UpdateScheduleCommand } from "@aws-sdk/client-scheduler";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { automationSchedulerFromEnv, EventBridgeAutomationScheduler } from "../../functions/adapters/aws/eventbridge-automation-scheduler";
import type { AutomationRecord } from "../../functions/automations/automation";
import { AutomationFiredEvent } from "../../functions/ports/automations";

const scheduler = mockClient(SchedulerClient);
beforeEach(() => scheduler.reset());

const now = new Date("2026-03-01T12:00:00.000Z");
const options = {
  client: () => new SchedulerClient({}),
  groupName: "SandboxControlPlane-automations",
  targetArn: "arn:aws:lambda:eu-west-1:123456789012:function:SandboxControlPlane-automation-fired",
  roleArn: "arn:aws:iam::123456789012:role/automation-scheduler",
  now: () => now,
};
const automation: AutomationRecord = {
  id: "aut_0123456789abcdef",
  orgId: "org-1",
  userId: "user-1",
  name: "nightly",
  schedule: "cron(30 2 ? * MON-FRI *)",
  timezone: "Europe/Berlin",
  repos: [],
  prompt: "report",
  enabled: true,
  disabledReason: null,
  provider: null,
  maxRunSeconds: 3600,
  notify: null,
  webhookSecret: { v: 1, alg: "AES-256-GCM", wrappedKey: "d3JhcHBlZA==", iv: "aXY=", ciphertext: "", tag: "dGFn" },
  scheduleAnchor: now.toISOString(),
  consecutiveFailures: 0,
  activeRun: null,
  lastRunAt: null,
  createdAt: now.toISOString(),
  updatedAt: now.toISOString(),
};
const target = {
  Arn: options.targetArn,
  RoleArn: options.roleArn,
  Input: JSON.stringify({ kind: "fire", orgId: "org-1", automationId: automation.id, scheduledAt: "<aws.scheduler.scheduled-time>" }),
  RetryPolicy: { MaximumRetryAttempts: 5, MaximumEventAgeInSeconds: 900 },
};

describe("EventBridgeAutomationScheduler", () => {
  it("creates one schedule per automation in the automations group: its expression and timezone, flexible window off, Scheduler's scheduled time in the payload", async () => {
    scheduler.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    await new EventBridgeAutomationScheduler(options).put(automation);
    const calls = scheduler.commandCalls(CreateScheduleCommand);
    expect(calls.map((c) => c.args[0].input)).toEqual([
      {
        Name: `automation-${automation.id}`,
        GroupName: "SandboxControlPlane-automations",
        ScheduleExpression: "cron(30 2 ? * MON-FRI *)",
        ScheduleExpressionTimezone: "Europe/Berlin",
        FlexibleTimeWindow: { Mode: "OFF" },
        State: "ENABLED",
        Description: "automation aut_0123456789abcdef (org-1)",
        Target: target,
      },
    ]);
    expect(scheduler.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
    // What Scheduler delivers (the placeholder substituted) parses as the handler's event.
    const delivered = JSON.parse((target.Input).replace("<aws.scheduler.scheduled-time>", "2026-03-02T01:30:00Z")) as unknown;
    expect(AutomationFiredEvent.parse(delivered)).toMatchObject({ kind: "fire", automationId: automation.id, scheduledAt: "2026-03-02T01:30:00Z" });
  });

  it("updates the existing schedule when the definition changes, and disables it (State DISABLED) with the automation", async () => {
    scheduler.on(CreateScheduleCommand).rejects(Object.assign(new Error("exists"), { name: "ConflictException" }));
    scheduler.on(UpdateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    await new EventBridgeAutomationScheduler(options).put({ ...automation, enabled: false, schedule: "rate(1 hour)", timezone: "UTC" });
    const updates = scheduler.commandCalls(UpdateScheduleCommand);
    expect(updates).toHaveLength(1);
    expect(updates[0]?.args[0].input).toMatchObject({ Name: `automation-${automation.id}`, ScheduleExpression: "rate(1 hour)", ScheduleExpressionTimezone: "UTC", State: "DISABLED", FlexibleTimeWindow: { Mode: "OFF" } });
  });

  it("deletes the schedule with the automation; an unknown one is a no-op; other errors propagate", async () => {
    scheduler.on(DeleteScheduleCommand).resolvesOnce({}).rejectsOnce(Object.assign(new Error("gone"), { name: "ResourceNotFoundException" })).rejectsOnce(Object.assign(new Error("denied"), { name: "AccessDeniedException" }));
    const adapter = new EventBridgeAutomationScheduler(options);
    await adapter.remove(automation);
    await adapter.remove(automation);
    await expect(adapter.remove(automation)).rejects.toThrow("denied");
    expect(scheduler.commandCalls(DeleteScheduleCommand).map((c) => c.args[0].input)).toEqual(Array(3).fill({ Name: `automation-${automation.id}`, GroupName: "SandboxControlPlane-automations" }));
  });

  it("arms a run's one-time timeout (deleted after it fires) and cancels it", async () => {
    scheduler.on(CreateScheduleCommand).resolves({});
    scheduler.on(DeleteScheduleCommand).resolves({});
    const adapter = new EventBridgeAutomationScheduler(options);
    const run = { id: "run_abc", automationId: automation.id, orgId: "org-1", scheduledAt: "2026-03-01T12:00:00.000Z" };
    await adapter.armTimeout(run, new Date("2026-03-01T13:00:00.000Z"));
    await adapter.cancelTimeout(run);
    expect(scheduler.commandCalls(CreateScheduleCommand)[0]?.args[0].input).toEqual({
      Name: "run-timeout-run_abc",
      GroupName: "SandboxControlPlane-automations",
      ScheduleExpression: "at(2026-03-01T13:00:00)",
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      ActionAfterCompletion: "DELETE",
      Target: { ...target, Input: JSON.stringify({ kind: "timeout", orgId: "org-1", automationId: automation.id, runId: "run_abc", scheduledAt: run.scheduledAt }) },
    });
    expect(scheduler.commandCalls(DeleteScheduleCommand)[0]?.args[0].input).toEqual({ Name: "run-timeout-run_abc", GroupName: "SandboxControlPlane-automations" });
  });

  it("without its environment every call fails naming the variables", async () => {
    await expect(automationSchedulerFromEnv({}, () => new SchedulerClient({})).put(automation)).rejects.toThrow("AUTOMATIONS_SCHEDULE_GROUP");
  });
});
