/**
 * The AWS port adapters against mocked SDK clients (aws-sdk-client-mock): the exact command
 * inputs they send, and how they map the SDK errors they handle on purpose.
 */
import { afterEach, describe, expect, it } from "vitest";
import { mockClient } from "aws-sdk-client-mock";
import { DescribeExecutionCommand, ExecutionAlreadyExists, InvalidExecutionInput, SFNClient, StartExecutionCommand } from "@aws-sdk/client-sfn";
import {
  ConflictException,
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
  ValidationException,
} from "@aws-sdk/client-scheduler";
import {
  ApiGatewayManagementApiClient,
  DeleteConnectionCommand,
  ForbiddenException,
  GoneException,
  PostToConnectionCommand,
} from "@aws-sdk/client-apigatewaymanagementapi";
import { ApiGatewayClientPush } from "../../functions/adapters/aws/apigw-client-push";
import { EventBridgeLifecycleScheduler, atExpression, earlyAtExpression } from "../../functions/adapters/aws/eventbridge-lifecycle-scheduler";
import {
  SfnFlowRunner,
  flowExecutionInput,
  stateMachineArnEnvName,
  stateMachineArnsFromEnv,
} from "../../functions/adapters/aws/sfn-flow-runner";
import { FLOW_NAMES, executionAttemptName, type FlowName } from "../../functions/ports/flow-runner";
import { ScheduleFiredEvent } from "../../functions/ports/lifecycle-scheduler";

const $metadata = {};
const sfn = mockClient(SFNClient);
const scheduler = mockClient(SchedulerClient);
const apigw = mockClient(ApiGatewayManagementApiClient);

afterEach(() => {
  sfn.reset();
  scheduler.reset();
  apigw.reset();
});

const arns = Object.fromEntries(
  FLOW_NAMES.map((f) => [f, `arn:aws:states:eu-west-1:123456789012:stateMachine:${f}`]),
) as Record<FlowName, string>;

describe("SfnFlowRunner", () => {
  const start = { flow: "pause" as const, sessionId: "ses_01ABC", generation: 7, actor: "user", reason: "user asked" };

  it("starts the flow's state machine with the deterministic name and input", async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: "arn:exec", startDate: new Date() });
    const result = await new SfnFlowRunner(() => new SFNClient({}), arns).start(start);

    expect(result).toEqual({ executionName: "pause-ses_01ABC-7", started: true });
    const calls = sfn.commandCalls(StartExecutionCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.args[0].input).toEqual({
      stateMachineArn: "arn:aws:states:eu-west-1:123456789012:stateMachine:pause",
      name: "pause-ses_01ABC-7",
      input: JSON.stringify({ sessionId: "ses_01ABC", flow: "pause", generation: 7, actor: "user", reason: "user asked", execution: "pause-ses_01ABC-7" }),
    });
  });

  it("sends byte-identical input for an identical request (no timestamps), reason null when absent", async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: "arn:exec", startDate: new Date() });
    const runner = new SfnFlowRunner(() => new SFNClient({}), arns);
    const noReason = { flow: "stop" as const, sessionId: "s1", generation: "v3", actor: "schedule:expiry" };
    await runner.start(noReason);
    await runner.start(noReason);

    const [first, second] = sfn.commandCalls(StartExecutionCommand).map((c) => c.args[0].input);
    expect(first?.input).toBe('{"sessionId":"s1","flow":"stop","generation":"v3","actor":"schedule:expiry","reason":null,"execution":"stop-s1-v3"}');
    expect(second).toEqual(first);
    expect(flowExecutionInput(noReason, "stop-s1-v3")).toEqual({ sessionId: "s1", flow: "stop", generation: "v3", actor: "schedule:expiry", reason: null, execution: "stop-s1-v3" });
  });

  it("joins an existing execution while it runs (ExecutionAlreadyExists, DescribeExecution RUNNING → started false)", async () => {
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: "Execution Already Exists", $metadata }));
    sfn.on(DescribeExecutionCommand).resolves({ status: "RUNNING" });
    const result = await new SfnFlowRunner(() => new SFNClient({}), arns).start(start);
    expect(result).toEqual({ executionName: "pause-ses_01ABC-7", started: false });
    expect(sfn.commandCalls(DescribeExecutionCommand).map((c) => c.args[0].input)).toEqual([
      { executionArn: "arn:aws:states:eu-west-1:123456789012:execution:pause:pause-ses_01ABC-7" },
    ]);
  });

  it.each(["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"] as const)(
    "a closed (%s) execution under the name does not swallow the request: the next attempt name starts",
    async (status) => {
      const taken = new Set(["pause-ses_01ABC-7"]);
      sfn.on(StartExecutionCommand).callsFake((input: { name: string }) => {
        if (taken.has(input.name)) throw new ExecutionAlreadyExists({ message: "Execution Already Exists", $metadata });
        return { executionArn: `arn:exec:${input.name}`, startDate: new Date() };
      });
      sfn.on(DescribeExecutionCommand).resolves({ status });
      const result = await new SfnFlowRunner(() => new SFNClient({}), arns).start(start);
      expect(result).toEqual({ executionName: "pause-ses_01ABC-7-r1", started: true });
      const names = sfn.commandCalls(StartExecutionCommand).map((c) => c.args[0].input.name);
      expect(names).toEqual(["pause-ses_01ABC-7", "pause-ses_01ABC-7-r1"]);
      // Same input for every attempt except the execution name it carries (the flow's lease owner).
      const inputs = sfn.commandCalls(StartExecutionCommand).map((c) => JSON.parse(c.args[0].input.input ?? "{}") as Record<string, unknown>);
      expect(inputs.map((i) => i.execution)).toEqual(names);
      expect(new Set(inputs.map(({ execution: _, ...rest }) => JSON.stringify(rest))).size).toBe(1);
    },
  );

  it("walks past several closed attempts and joins the first one still running; attempt names stay within 80 characters", async () => {
    const long = { ...start, sessionId: `ses_${"x".repeat(90)}` };
    const closed = new Set([executionAttemptName(long, 0), executionAttemptName(long, 1)]);
    const running = executionAttemptName(long, 2);
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: "Execution Already Exists", $metadata }));
    sfn.on(DescribeExecutionCommand).callsFake((input: { executionArn: string }) => {
      const name = input.executionArn.split(":").at(-1) ?? "";
      return { status: closed.has(name) ? "FAILED" : name === running ? "RUNNING" : "SUCCEEDED" };
    });
    const result = await new SfnFlowRunner(() => new SFNClient({}), arns).start(long);
    expect(result).toEqual({ executionName: running, started: false });
    expect(running).toMatch(/-r2$/);
    expect(running.length).toBeLessThanOrEqual(80);
  });

  it("propagates every other error", async () => {
    sfn.on(StartExecutionCommand).rejects(new InvalidExecutionInput({ message: "bad input", $metadata }));
    await expect(new SfnFlowRunner(() => new SFNClient({}), arns).start(start)).rejects.toBeInstanceOf(InvalidExecutionInput);
  });

  it("reads ARNs from the environment and fails only when a flow without one is started, naming the variable", async () => {
    expect(FLOW_NAMES.map(stateMachineArnEnvName)).toEqual([
      "STATE_MACHINE_ARN_ENSURE_RUNTIME",
      "STATE_MACHINE_ARN_PAUSE",
      "STATE_MACHINE_ARN_SNAPSHOT",
      "STATE_MACHINE_ARN_STOP",
      "STATE_MACHINE_ARN_MIGRATE",
      "STATE_MACHINE_ARN_IDLE_SNAPSHOT",
    ]);
    const fromEnv = stateMachineArnsFromEnv({ STATE_MACHINE_ARN_IDLE_SNAPSHOT: "arn:idle", STATE_MACHINE_ARN_PAUSE: "" });
    expect(fromEnv).toEqual({ "idle-snapshot": "arn:idle" });

    sfn.on(StartExecutionCommand).resolves({ executionArn: "arn:exec", startDate: new Date() });
    const runner = new SfnFlowRunner(() => new SFNClient({}), fromEnv);
    await expect(runner.start({ flow: "idle-snapshot", sessionId: "s1", generation: 1, actor: "schedule:idle-check" })).resolves.toEqual({
      executionName: "idle-snapshot-s1-1",
      started: true,
    });
    expect(sfn.commandCalls(StartExecutionCommand)[0]?.args[0].input.stateMachineArn).toBe("arn:idle");
    await expect(runner.start(start)).rejects.toThrow(/STATE_MACHINE_ARN_PAUSE/);
    expect(sfn.commandCalls(StartExecutionCommand)).toHaveLength(1);
  });
});

describe("EventBridgeLifecycleScheduler", () => {
  const now = new Date("2025-03-01T12:00:00.000Z");
  const target = { sessionId: "ses_01ABC", purpose: "expiry" as const };
  const options = {
    client: () => new SchedulerClient({}),
    groupName: "sandbox-lifecycle",
    targetArn: "arn:aws:lambda:eu-west-1:123456789012:function:schedule-fired",
    roleArn: "arn:aws:iam::123456789012:role/scheduler-invoke",
    now: () => now,
  };

  function expectedInput(expression: string, at: Date) {
    return {
      Name: "expiry-ses_01ABC",
      GroupName: "sandbox-lifecycle",
      ScheduleExpression: expression,
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      ActionAfterCompletion: "DELETE",
      Target: {
        Arn: "arn:aws:lambda:eu-west-1:123456789012:function:schedule-fired",
        RoleArn: "arn:aws:iam::123456789012:role/scheduler-invoke",
        Input: JSON.stringify({ sessionId: "ses_01ABC", purpose: "expiry", at: at.toISOString() }),
        RetryPolicy: { MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 3600 },
      },
    };
  }

  it("creates a one-time at() schedule in UTC, deleted after it fires, carrying the fired event", async () => {
    scheduler.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    const at = new Date("2025-03-01T13:30:15.000Z");
    await new EventBridgeLifecycleScheduler(options).arm(target, at);

    const calls = scheduler.commandCalls(CreateScheduleCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.args[0].input).toEqual(expectedInput("at(2025-03-01T13:30:15)", at));
    expect(scheduler.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
    // The target input parses with the schema the target Lambda uses.
    expect(ScheduleFiredEvent.parse(JSON.parse(calls[0]?.args[0].input.Target?.Input ?? ""))).toEqual({
      sessionId: "ses_01ABC",
      purpose: "expiry",
      at: "2025-03-01T13:30:15.000Z",
    });
  });

  it("names the dead-letter queue when the stack has one (SCHEDULE_DEAD_LETTER_ARN; issue 19)", async () => {
    scheduler.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    const at = new Date("2025-03-01T13:30:15.000Z");
    const dlq = "arn:aws:sqs:us-east-1:123456789012:scp-schedule-dead-letters";
    await new EventBridgeLifecycleScheduler({ ...options, deadLetterArn: dlq }).arm(target, at);
    const expected = expectedInput("at(2025-03-01T13:30:15)", at);
    expect(scheduler.commandCalls(CreateScheduleCommand)[0]?.args[0].input).toEqual({ ...expected, Target: { ...expected.Target, DeadLetterConfig: { Arn: dlq } } });
  });

  it("rounds a fractional second UP so the schedule never fires early", async () => {
    scheduler.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    const at = new Date("2025-03-01T13:30:15.001Z");
    await new EventBridgeLifecycleScheduler(options).arm(target, at);
    expect(scheduler.commandCalls(CreateScheduleCommand)[0]?.args[0].input.ScheduleExpression).toBe("at(2025-03-01T13:30:16)");
    expect(atExpression(new Date("2025-12-31T23:59:59.999Z"), now)).toBe("at(2026-01-01T00:00:00)");
  });

  it("idle checks are armed for the start of their minute (Scheduler's precision), the exact time in the event", async () => {
    scheduler.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    const at = new Date("2025-03-01T13:30:45.250Z");
    await new EventBridgeLifecycleScheduler(options).arm({ sessionId: target.sessionId, purpose: "idle-check" }, at);
    const input = scheduler.commandCalls(CreateScheduleCommand)[0]?.args[0].input;
    expect(input?.ScheduleExpression).toBe("at(2025-03-01T13:30:00)");
    expect(JSON.parse(input?.Target?.Input ?? "{}")).toEqual({ sessionId: target.sessionId, purpose: "idle-check", at: "2025-03-01T13:30:45.250Z" });
    // Never sooner than now + 1s, even when the minute began earlier.
    expect(earlyAtExpression(new Date("2025-03-01T12:00:40.000Z"), new Date("2025-03-01T12:00:10.000Z"))).toBe("at(2025-03-01T12:00:11)");
  });

  it("arms a time in the past for now + 1s, keeping the requested time in the event", async () => {
    scheduler.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    const past = new Date("2025-03-01T11:00:00.000Z");
    await new EventBridgeLifecycleScheduler(options).arm(target, past);
    expect(scheduler.commandCalls(CreateScheduleCommand)[0]?.args[0].input).toEqual(expectedInput("at(2025-03-01T12:00:01)", past));
    expect(atExpression(new Date("2025-03-01T12:00:00.500Z"), new Date("2025-03-01T12:00:00.250Z"))).toBe("at(2025-03-01T12:00:02)");
  });

  it("replaces an existing schedule: ConflictException → UpdateSchedule with the same fields", async () => {
    scheduler.on(CreateScheduleCommand).rejects(new ConflictException({ message: "exists", Message: "exists", $metadata }));
    scheduler.on(UpdateScheduleCommand).resolves({ ScheduleArn: "arn:schedule" });
    const at = new Date("2025-03-01T14:00:00.000Z");
    await new EventBridgeLifecycleScheduler(options).arm(target, at);

    const update = scheduler.commandCalls(UpdateScheduleCommand);
    expect(update).toHaveLength(1);
    expect(update[0]?.args[0].input).toEqual(expectedInput("at(2025-03-01T14:00:00)", at));
    expect(update[0]?.args[0].input).toEqual(scheduler.commandCalls(CreateScheduleCommand)[0]?.args[0].input);
  });

  it("creates afresh when the conflicting schedule fired and was deleted before the update", async () => {
    scheduler
      .on(CreateScheduleCommand)
      .rejectsOnce(new ConflictException({ message: "exists", Message: "exists", $metadata }))
      .resolves({ ScheduleArn: "arn:schedule" });
    scheduler.on(UpdateScheduleCommand).rejects(new ResourceNotFoundException({ message: "gone", Message: "gone", $metadata }));
    await new EventBridgeLifecycleScheduler(options).arm(target, new Date("2025-03-01T14:00:00.000Z"));
    expect(scheduler.commandCalls(CreateScheduleCommand)).toHaveLength(2);
  });

  it("propagates other errors from create and update", async () => {
    scheduler.on(CreateScheduleCommand).rejects(new ValidationException({ message: "bad", Message: "bad", $metadata }));
    await expect(new EventBridgeLifecycleScheduler(options).arm(target, new Date("2025-03-01T14:00:00Z"))).rejects.toBeInstanceOf(ValidationException);
    expect(scheduler.commandCalls(UpdateScheduleCommand)).toHaveLength(0);

    scheduler.reset();
    scheduler.on(CreateScheduleCommand).rejects(new ConflictException({ message: "exists", Message: "exists", $metadata }));
    scheduler.on(UpdateScheduleCommand).rejects(new ValidationException({ message: "bad", Message: "bad", $metadata }));
    await expect(new EventBridgeLifecycleScheduler(options).arm(target, new Date("2025-03-01T14:00:00Z"))).rejects.toBeInstanceOf(ValidationException);
  });

  it("cancels by deleting the named schedule; an unknown one is a no-op; other errors propagate", async () => {
    scheduler.on(DeleteScheduleCommand).resolves({});
    const adapter = new EventBridgeLifecycleScheduler(options);
    await adapter.cancel({ sessionId: "ses_01ABC", purpose: "idle-check" });
    expect(scheduler.commandCalls(DeleteScheduleCommand)[0]?.args[0].input).toEqual({ Name: "idle-check-ses_01ABC", GroupName: "sandbox-lifecycle" });

    scheduler.on(DeleteScheduleCommand).rejects(new ResourceNotFoundException({ message: "not found", Message: "not found", $metadata }));
    await expect(adapter.cancel(target)).resolves.toBeUndefined();

    scheduler.on(DeleteScheduleCommand).rejects(new ValidationException({ message: "bad", Message: "bad", $metadata }));
    await expect(adapter.cancel(target)).rejects.toBeInstanceOf(ValidationException);
  });
});

describe("ApiGatewayClientPush", () => {
  it("posts the message as JSON bytes to the connection", async () => {
    apigw.on(PostToConnectionCommand).resolves({});
    const outcome = await new ApiGatewayClientPush(() => new ApiGatewayManagementApiClient({})).send("conn-1=", { type: "status", status: "running" });

    expect(outcome).toBe("sent");
    const input = apigw.commandCalls(PostToConnectionCommand)[0]?.args[0].input;
    expect(input?.ConnectionId).toBe("conn-1=");
    expect(Buffer.from(input?.Data as Uint8Array).toString("utf8")).toBe('{"type":"status","status":"running"}');
  });

  it("reports a gone connection (410) as gone and propagates other errors", async () => {
    const push = new ApiGatewayClientPush(() => new ApiGatewayManagementApiClient({}));
    apigw.on(PostToConnectionCommand).rejects(new GoneException({ message: "gone", $metadata }));
    await expect(push.send("conn-1=", { type: "ping" })).resolves.toBe("gone");

    apigw.on(PostToConnectionCommand).rejects(new ForbiddenException({ message: "forbidden", $metadata }));
    await expect(push.send("conn-1=", { type: "ping" })).rejects.toBeInstanceOf(ForbiddenException);
  });

  it("closes a connection with DeleteConnection; a gone one is gone, other errors propagate (issue 14 item 5)", async () => {
    const push = new ApiGatewayClientPush(() => new ApiGatewayManagementApiClient({}));
    apigw.on(DeleteConnectionCommand).resolves({});
    await expect(push.disconnect("conn-2=")).resolves.toBe("sent");
    expect(apigw.commandCalls(DeleteConnectionCommand)[0]?.args[0].input).toEqual({ ConnectionId: "conn-2=" });
    apigw.on(DeleteConnectionCommand).rejects(new GoneException({ message: "gone", $metadata }));
    await expect(push.disconnect("conn-2=")).resolves.toBe("gone");
    apigw.on(DeleteConnectionCommand).rejects(new ForbiddenException({ message: "forbidden", $metadata }));
    await expect(push.disconnect("conn-2=")).rejects.toBeInstanceOf(ForbiddenException);
  });
});
