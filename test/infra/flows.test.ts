/**
 * Lifecycle flows in the stack: state machines bound to the right step functions, least-privilege
 * roles for the machines, the scheduler and the functions that start flows or arm schedules, and
 * idle snapshotting (seed 002): the idle-snapshot flow, the orphan sweeper on its rate schedule,
 * the routes that arm idle checks, and the alarms on the metrics the functions publish.
 * Synthesized without bundling (the bundles and cdk-nag are covered by control-plane-stack.test.ts).
 */
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArnFormat } from "aws-cdk-lib";
import { Match, type Template } from "aws-cdk-lib/assertions";
import type { IConstruct } from "constructs";
import {
  DEFAULT_SWEEPER_INTERVAL_SECONDS,
  METERING_RATE_MINUTES,
  FUNCTIONS_SERVICE_NAME,
  METRICS_NAMESPACE,
  SCHEDULE_FIRED_TIMEOUT_SECONDS,
  sweeperRateMinutes,
  type ControlPlaneStack,
} from "../../infra/control-plane-stack";
import { deployableFlows, executionArnPattern, flowDefinitionPath, stateMachineArn, taskResources } from "../../infra/lifecycle-flows";
import { stateMachineArnEnvName } from "../../functions/adapters/aws/sfn-flow-runner";
import { FLOW_STEPS, stepArnVariable } from "../../functions/flows/steps";
import { BUILD_KEY_HOLDERS, BUILD_STEPS } from "../../functions/builds/build-steps";
import { builderStateMachineArn } from "../../infra/snapshot-builder";
import { HTTP_ROUTES as DECLARED_ROUTES, servingRoute } from "../../functions/http/routes";

/** Each route by its id, with the needs of the function serving it (a route group's union). */
const HTTP_ROUTES = DECLARED_ROUTES.map((r) => ({ ...servingRoute(r), id: r.id }));
import { FLOW_NAMES, type FlowName } from "../../functions/ports/flow-runner";
import { METRIC_NAMES } from "../../functions/ports/metrics-sink";
import { parseConfig } from "../../functions/config/config";
import { WS_ROUTES } from "../../functions/ws/routes";
import { actionsOf, asArray, getAtt, resourcesFor, stackQueries, synthWithoutBundling as synth, type Resources, type Statement } from "./stack-queries";

const STATE_MACHINES_DIR = path.resolve(import.meta.dirname, "../../statemachines");
const STEP_VARIABLES = new Set(FLOW_STEPS.map(stepArnVariable));

let stack: ControlPlaneStack;
let template: Template;
let resources: Resources;
let outdir: string;
let q: ReturnType<typeof stackQueries>;

beforeAll(() => {
  ({ stack, template, resources, dir: outdir } = synth());
  q = stackQueries({ stack, resources });
});
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

/** Every object with `Type: "Task"` anywhere in a document (independent of the ASL walker). */
function deepTasks(node: unknown): { Resource?: unknown }[] {
  if (Array.isArray(node)) return node.flatMap(deepTasks);
  if (node === null || typeof node !== "object") return [];
  const self = (node as { Type?: unknown }).Type === "Task" ? [node as { Resource?: unknown }] : [];
  return [...self, ...Object.values(node).flatMap(deepTasks)];
}

const logicalIdOf = (construct: IConstruct | undefined): string => q.logicalIdOf(construct);
const statementsOfRole = (roleLogicalId: string) => q.statementsOfRole(roleLogicalId);
const statementsOfFunction = (fnId: string) => q.statementsOfFunction(fnId);
const envOf = (fnId: string) => q.envOf(fnId);

const resolvedMachineArn = (flow: FlowName): unknown => stack.resolve(stateMachineArn(stack, flow));
const sameSet = (actual: unknown[], expected: unknown[]): void =>
  expect(new Set(actual.map((r) => JSON.stringify(r)))).toEqual(new Set(expected.map((r) => JSON.stringify(r))));
const groupSchedules = (): unknown => stack.resolve(stack.formatArn({ service: "scheduler", resource: "schedule", resourceName: `${stack.stackName}-lifecycle/*` }));
const SCHEDULE_SETTINGS = ["SCHEDULE_GROUP_NAME", "SCHEDULE_TARGET_ARN", "SCHEDULE_ROLE_ARN"];
const SCHEDULE_ACTIONS = ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule"];

/** The scheduling grant (functions that arm idle or expiry checks): this group's schedules, the scheduler role passed to Scheduler only. */
function expectSchedulingGrant(statements: Statement[], what: string): void {
  for (const action of SCHEDULE_ACTIONS) expect(resourcesFor(statements, action), `${what} ${action}`).toEqual([groupSchedules()]);
  expect(actionsOf(statements).filter((a) => a.startsWith("scheduler:")), what).toHaveLength(SCHEDULE_ACTIONS.length);
  const passRole = statements.filter((s) => asArray(s.Action).includes("iam:PassRole"));
  expect(passRole, what).toEqual([
    expect.objectContaining({ Resource: getAtt(logicalIdOf(findRoleAssumedBy("scheduler.amazonaws.com"))), Condition: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } } }),
  ]);
}
function expectNoSchedulingGrant(statements: Statement[], what: string): void {
  expect(actionsOf(statements).filter((a) => a.startsWith("scheduler:") || a === "iam:PassRole"), what).toEqual([]);
}

describe("ASL files", () => {
  const files = readdirSync(STATE_MACHINES_DIR).filter((f) => f.endsWith(".asl.json"));

  it("are each named after a flow (a misspelt file would never deploy)", () => {
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(FLOW_NAMES as readonly string[]).toContain(f.replace(/\.asl\.json$/, ""));
  });

  it("bind every Task state to a step in FLOW_STEPS, as exactly one ${<Step>FunctionArn}", () => {
    for (const f of files) {
      const definition = JSON.parse(readFileSync(path.join(STATE_MACHINES_DIR, f), "utf8")) as Parameters<typeof taskResources>[0];
      const tasks = deepTasks(definition);
      expect(tasks.length, f).toBeGreaterThan(0);
      // The stack's walker sees every Task (Parallel branches and Map processors included).
      expect(taskResources(definition), f).toHaveLength(tasks.length);
      for (const task of tasks) {
        const variable = /^\$\{([A-Za-z0-9_]+)\}$/.exec(String(task.Resource))?.[1];
        expect(variable, `${f}: Task Resource ${String(task.Resource)}`).toBeDefined();
        expect(STEP_VARIABLES.has(variable ?? ""), `${f}: \${${variable}} is no step in FLOW_STEPS`).toBe(true);
      }
    }
  });
});

describe("state machines", () => {
  it("exist exactly for the flows with an ASL file", () => {
    const machines = Object.values(resources).filter((r) => r.Type === "AWS::StepFunctions::StateMachine");
    const names = machines.map((m) => m.Properties.StateMachineName).sort();
    const expected = FLOW_NAMES.filter((flow) => existsSync(flowDefinitionPath(flow)));
    expect(expected).toEqual(deployableFlows());
    // Plus the snapshot builder (statemachines/builds/, not a lifecycle flow).
    expect(names).toEqual([...expected.map((flow) => `${stack.stackName}-${flow}`), `${stack.stackName}-snapshot-builder`].sort());
  });

  it("are Standard, traced, logged at ALL without execution data, and time out after three hours (above the worst path: limits.test.ts)", () => {
    for (const flow of deployableFlows()) {
      const machine = resources[logicalIdOf(stack.stateMachines[flow])];
      expect(machine?.Properties).toMatchObject({
        StateMachineName: `${stack.stackName}-${flow}`,
        StateMachineType: "STANDARD",
        TracingConfiguration: { Enabled: true },
        LoggingConfiguration: { Level: "ALL", IncludeExecutionData: false },
      });
      const definition = JSON.parse(machine?.Properties.DefinitionString as string) as { TimeoutSeconds?: number };
      expect(definition.TimeoutSeconds, flow).toBe(3 * 3600);
      // Each machine logs to its own log group.
      const logGroupArn = (machine?.Properties.LoggingConfiguration as { Destinations: { CloudWatchLogsLogGroup: { LogGroupArn: { "Fn::GetAtt": [string, string] } } }[] }).Destinations[0]?.CloudWatchLogsLogGroup.LogGroupArn;
      expect(resources[logGroupArn?.["Fn::GetAtt"][0] ?? ""]?.Properties.LogGroupName).toBe(`/aws/vendedlogs/states/${stack.stackName}-${flow}`);
    }
  });

  it("resolve every Task Resource to the Lambda function built for that step", () => {
    for (const flow of deployableFlows()) {
      const machine = resources[logicalIdOf(stack.stateMachines[flow])];
      const substitutions = machine?.Properties.DefinitionSubstitutions as Record<string, unknown>;
      const definition = JSON.parse(machine?.Properties.DefinitionString as string) as unknown;
      const tasks = deepTasks(definition);
      expect(tasks.length).toBeGreaterThan(0);
      for (const task of tasks) {
        const variable = /^\$\{([A-Za-z0-9_]+)\}$/.exec(String(task.Resource))?.[1] ?? "";
        const step = FLOW_STEPS.find((s) => stepArnVariable(s) === variable);
        expect(step, `${flow}: ${String(task.Resource)}`).toBeDefined();
        const target = substitutions[variable] as { "Fn::GetAtt": [string, string] } | undefined;
        expect(target?.["Fn::GetAtt"][1]).toBe("Arn");
        const logicalId = target?.["Fn::GetAtt"][0] ?? "";
        expect(resources[logicalId]?.Type).toBe("AWS::Lambda::Function");
        expect(logicalId.startsWith(`${step?.id}Function`), `${variable} -> ${logicalId}`).toBe(true);
        // The very function the stack built from that FLOW_STEPS entry (its entry is the step's module).
        expect(target).toEqual(stack.resolve(stack.functions[step?.id ?? ""]?.functionArn));
      }
    }
  });

  it("may invoke exactly the functions their definition references, and nothing else in Lambda", () => {
    for (const flow of deployableFlows()) {
      const machine = resources[logicalIdOf(stack.stateMachines[flow])];
      const roleId = (machine?.Properties.RoleArn as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0];
      const statements = statementsOfRole(roleId);
      const definition = JSON.parse(readFileSync(flowDefinitionPath(flow), "utf8")) as unknown;
      const referenced = new Set(deepTasks(definition).map((t) => /^\$\{(.+)\}$/.exec(String(t.Resource))?.[1]));
      const expected = FLOW_STEPS.filter((s) => referenced.has(stepArnVariable(s))).map((s) => getAtt(logicalIdOf(stack.functions[s.id])));
      const invokable = resourcesFor(statements, "lambda:InvokeFunction");
      expect(new Set(invokable.map((r) => JSON.stringify(r)))).toEqual(new Set(expected.map((r) => JSON.stringify(r))));
      expect(actionsOf(statements).filter((a) => a.startsWith("lambda:"))).toEqual(["lambda:InvokeFunction"]);
      if (referenced.size < FLOW_STEPS.length) expect(invokable.length).toBeLessThan(FLOW_STEPS.length);
    }
  });

  it("each alarm on failed and timed-out executions", () => {
    for (const flow of deployableFlows()) {
      for (const metric of ["ExecutionsFailed", "ExecutionsTimedOut"]) {
        template.hasResourceProperties("AWS::CloudWatch::Alarm", {
          Namespace: "AWS/States",
          MetricName: metric,
          Threshold: 1,
          ComparisonOperator: "GreaterThanOrEqualToThreshold",
          Dimensions: [{ Name: "StateMachineArn", Value: { Ref: logicalIdOf(stack.stateMachines[flow]) } }],
        });
      }
    }
  });

  it("are stack outputs", () => {
    const outputs = Object.values(template.toJSON().Outputs as Record<string, { Value: unknown }>).map((o) => JSON.stringify(o.Value));
    for (const flow of deployableFlows()) expect(outputs).toContain(JSON.stringify({ Ref: logicalIdOf(stack.stateMachines[flow]) }));
  });
});

describe("flow step functions", () => {
  it("follow the step table: timeout, memory (more for sandbox work), table read/write", () => {
    for (const step of FLOW_STEPS) {
      const fn = resources[logicalIdOf(stack.functions[step.id])];
      expect(fn?.Properties).toMatchObject({ Runtime: "nodejs22.x", Architectures: ["arm64"], Timeout: step.timeoutSeconds, MemorySize: step.sandboxAccess ? 1024 : 512 });
      const actions = actionsOf(statementsOfFunction(step.id));
      expect(actions).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"]));
      template.hasResourceProperties("AWS::CloudWatch::Alarm", {
        MetricName: "Errors",
        Namespace: "AWS/Lambda",
        Dimensions: [{ Name: "FunctionName", Value: { Ref: logicalIdOf(stack.functions[step.id]) } }],
      });
    }
  });

  it("orchestrating steps (FinishStep) start ensure-runtime and stop (the circuit breaker) and arm schedules in the lifecycle group only", () => {
    const orchestrators = FLOW_STEPS.filter((s) => s.orchestrates);
    expect(orchestrators.map((s) => s.id)).toContain("FinishStep");
    for (const step of orchestrators) {
      const statements = statementsOfFunction(step.id);
      sameSet(resourcesFor(statements, "states:StartExecution"), [resolvedMachineArn("ensure-runtime"), resolvedMachineArn("stop")]);
      expect(envOf(step.id)[stateMachineArnEnvName("ensure-runtime")]).toEqual(resolvedMachineArn("ensure-runtime"));
      expect(envOf(step.id)[stateMachineArnEnvName("stop")]).toEqual(resolvedMachineArn("stop"));
      expect(Object.keys(envOf(step.id)).filter((k) => k.startsWith("STATE_MACHINE_ARN_")).sort()).toEqual([stateMachineArnEnvName("ensure-runtime"), stateMachineArnEnvName("stop")].sort());
      expectSchedulingGrant(statements, step.id);
    }
  });

  it("other steps cannot start flows, arm schedules or pass roles", () => {
    for (const step of FLOW_STEPS.filter((s) => !s.orchestrates)) {
      // RecordFailure ends automation runs (it deletes a run's timeout, disables a failing automation's
      // schedule): the automations group's schedules and role only (test/infra/automations-stack.test.ts).
      const statements = statementsOfFunction(step.id).filter((s) => step.id !== "RecordFailureStep" || !JSON.stringify(s.Resource).includes("automations") && !JSON.stringify(s.Resource).includes("AutomationSchedulerRole"));
      const actions = actionsOf(statements);
      expect(actions.filter((a) => a.startsWith("states:") || a.startsWith("scheduler:") || a === "iam:PassRole"), step.id).toEqual([]);
      expect(Object.keys(envOf(step.id)).filter((k) => k.startsWith("STATE_MACHINE_ARN_")), step.id).toEqual([]);
    }
  });

  it("every flow Lambda gets the schedule settings its cold start requires", () => {
    const scheduleFired = logicalIdOf(stack.functions.ScheduleFired);
    expect(resources[scheduleFired]?.Properties.FunctionName).toBe(`${stack.stackName}-schedule-fired`);
    const targetArn = stack.resolve(stack.formatArn({ service: "lambda", resource: "function", resourceName: `${stack.stackName}-schedule-fired`, arnFormat: ArnFormat.COLON_RESOURCE_NAME }));
    for (const id of [...FLOW_STEPS.map((s) => s.id), "ScheduleFired", "Sweeper"]) {
      const env = envOf(id);
      expect(env.SCHEDULE_GROUP_NAME, id).toBe(`${stack.stackName}-lifecycle`);
      expect(env.SCHEDULE_TARGET_ARN, id).toEqual(targetArn);
      expect(env.SCHEDULE_ROLE_ARN, id).toEqual(getAtt(logicalIdOf(findRoleAssumedBy("scheduler.amazonaws.com"))));
    }
  });
});

function findRoleAssumedBy(service: string): IConstruct {
  const match = stack.node.findAll().find((c) => {
    const cfn = c.node.defaultChild as { assumeRolePolicyDocument?: unknown; cfnResourceType?: string } | undefined;
    return cfn?.cfnResourceType === "AWS::IAM::Role" && JSON.stringify(stack.resolve(cfn.assumeRolePolicyDocument)).includes(`"${service}"`);
  });
  if (!match) throw new Error(`no role assumed by ${service}`);
  return match;
}

describe("EventBridge Scheduler", () => {
  it("has the lifecycle schedule group", () => {
    template.hasResourceProperties("AWS::Scheduler::ScheduleGroup", { Name: `${stack.stackName}-lifecycle` });
  });

  it("assumes a role (same account only) that can invoke schedule-fired, the sweeper, the prebuild rebuild and the metering pass (and dead-letter what failed) and nothing else", () => {
    const roleId = logicalIdOf(findRoleAssumedBy("scheduler.amazonaws.com"));
    expect(resources[roleId]?.Properties.AssumeRolePolicyDocument).toMatchObject({
      Statement: [
        {
          Action: "sts:AssumeRole",
          Effect: "Allow",
          Principal: { Service: "scheduler.amazonaws.com" },
          Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
        },
      ],
    });
    const statements = statementsOfRole(roleId);
    // And sending what failed every retry to the schedules' dead-letter queue (issue 19), nothing else.
    expect([...new Set(actionsOf(statements))].sort()).toEqual(["lambda:InvokeFunction", "sqs:SendMessage"]);
    expect(resourcesFor(statements, "sqs:SendMessage").map((r) => JSON.stringify(r))).toEqual([expect.stringContaining(":SandboxControlPlane-schedule-dead-letters")]);
    // Unqualified ARNs only: no version or alias wildcard.
    sameSet(resourcesFor(statements, "lambda:InvokeFunction"), [
      getAtt(logicalIdOf(stack.functions.ScheduleFired)),
      getAtt(logicalIdOf(stack.functions.Sweeper)),
      getAtt(logicalIdOf(stack.functions.PrebuildRebuild)),
      getAtt(logicalIdOf(stack.functions.Metering)),
    ]);
  });

  it("schedule-fired reads the table, starts migrate (expiry) and idle-snapshot (idle check), and re-arms idle checks", () => {
    const statements = statementsOfFunction("ScheduleFired");
    sameSet(resourcesFor(statements, "states:StartExecution"), [resolvedMachineArn("migrate"), resolvedMachineArn("idle-snapshot")]);
    expect(envOf("ScheduleFired")[stateMachineArnEnvName("migrate")]).toEqual(resolvedMachineArn("migrate"));
    expect(envOf("ScheduleFired")[stateMachineArnEnvName("idle-snapshot")]).toEqual(resolvedMachineArn("idle-snapshot"));
    const actions = actionsOf(statements);
    expect(actions).toContain("dynamodb:GetItem");
    expect(actions).not.toContain("dynamodb:PutItem");
    expectSchedulingGrant(statements, "ScheduleFired");
  });

  it("schedule-fired never waits for an early idle-check delivery: idle-snapshot's first state is the Wait (issue 15)", () => {
    const maxEarly = parseConfig({ TABLE_NAME: "t" }).IDLE_CHECK_MAX_EARLY_SECONDS;
    // The timeout covers the work (reads, a flow start or a re-arm), not the up-to-70 s an early delivery used to sleep.
    expect(SCHEDULE_FIRED_TIMEOUT_SECONDS).toBe(30);
    expect(SCHEDULE_FIRED_TIMEOUT_SECONDS).toBeLessThan(maxEarly);
    expect(resources[logicalIdOf(stack.functions.ScheduleFired)]?.Properties.Timeout).toBe(SCHEDULE_FIRED_TIMEOUT_SECONDS);
    // The deployed idle-snapshot machine starts with the Wait on the execution input's notBefore.
    const machine = Object.values(resources).find((r) => r.Type === "AWS::StepFunctions::StateMachine" && JSON.stringify(r.Properties).includes("WaitUntilDue"));
    expect(JSON.stringify(machine?.Properties.DefinitionString)).toContain('\\"StartAt\\":\\"WaitUntilDue\\"');
  });
});

describe("HTTP routes that arm schedules", () => {
  it("the proxy connection routes exist: PUT refreshes, DELETE arms the idle check", () => {
    const put = HTTP_ROUTES.find((r) => r.id === "PutProxyConnection");
    const del = HTTP_ROUTES.find((r) => r.id === "DeleteProxyConnection");
    expect(put).toMatchObject({ method: "PUT", path: "/v1/sessions/{id}/proxy-connections/{proxyId}", tableAccess: "readwrite" });
    expect(del).toMatchObject({ method: "DELETE", path: "/v1/sessions/{id}/proxy-connections/{proxyId}", tableAccess: "readwrite", armsSchedules: true });
    const routeKeys = Object.values(resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Route").map((r) => r.Properties.RouteKey);
    expect(routeKeys).toEqual(expect.arrayContaining(["PUT /v1/sessions/{id}/proxy-connections/{proxyId}", "DELETE /v1/sessions/{id}/proxy-connections/{proxyId}"]));
  });

  it("get the schedule settings and the scheduling grant exactly when they arm schedules", () => {
    const stepEnv = envOf(FLOW_STEPS[0]?.id ?? "");
    expect(HTTP_ROUTES.filter((r) => r.armsSchedules).map((r) => r.id)).toContain("DeleteProxyConnection");
    for (const route of HTTP_ROUTES) {
      const statements = statementsOfFunction(route.id);
      const env = envOf(route.id);
      if (route.armsSchedules) {
        for (const name of SCHEDULE_SETTINGS) expect(env[name], `${route.id} ${name}`).toEqual(stepEnv[name]);
        expectSchedulingGrant(statements, route.id);
      } else {
        for (const name of SCHEDULE_SETTINGS) expect(env[name], `${route.id} ${name}`).toBeUndefined();
        expectNoSchedulingGrant(statements, route.id);
      }
    }
  });
});

describe("WebSocket routes that arm schedules", () => {
  it("$disconnect (the last client leaving) may arm schedules; the other routes may not", () => {
    expect(WS_ROUTES.find((r) => r.routeKey === "$disconnect")?.armsSchedules).toBe(true);
    for (const route of WS_ROUTES) {
      if (route.armsSchedules) expectSchedulingGrant(statementsOfFunction(route.id), route.routeKey);
      else expectNoSchedulingGrant(statementsOfFunction(route.id), route.routeKey);
    }
    expectNoSchedulingGrant(statementsOfFunction("SendInit"), "SendInit");
  });
});

describe("HTTP routes that start flows", () => {
  it("get the ARN and states:StartExecution for exactly the flows they declare", () => {
    for (const route of HTTP_ROUTES) {
      const flows = route.startsFlows ?? [];
      const statements = statementsOfFunction(route.id);
      // Routes that start builds may also start the snapshot builder, and only it (infra/snapshot-builder.ts).
      const builder = route.startsBuilds ? [JSON.stringify(stack.resolve(builderStateMachineArn(stack)))] : [];
      expect(new Set(resourcesFor(statements, "states:StartExecution").map((r) => JSON.stringify(r))), route.id).toEqual(
        new Set([...flows.map((f) => JSON.stringify(resolvedMachineArn(f))), ...builder]),
      );
      // A taken execution name is joined only while that execution runs (SfnFlowRunner describes it).
      expect(new Set(resourcesFor(statements, "states:DescribeExecution").map((r) => JSON.stringify(r))), route.id).toEqual(
        new Set(flows.map((f) => JSON.stringify(stack.resolve(executionArnPattern(stack, f))))),
      );
      const envArns = Object.keys(envOf(route.id)).filter((k) => k.startsWith("STATE_MACHINE_ARN_")).sort();
      expect(envArns, route.id).toEqual([...flows.map(stateMachineArnEnvName), ...(route.startsBuilds ? ["STATE_MACHINE_ARN_SNAPSHOT_BUILDER"] : [])].sort());
    }
  });
});

describe("provider credentials", () => {
  const secretReaders = (): string[] => [
    ...FLOW_STEPS.filter((s) => s.sandboxAccess).map((s) => s.id),
    ...HTTP_ROUTES.filter((r) => r.agentAccess || r.sandboxAccess || r.providerAccess).map((r) => r.id),
    // Lists and terminates sandboxes at the providers.
    "Sweeper",
    // The snapshot builder's sandbox steps (functions/builds/build-steps.ts).
    ...BUILD_STEPS.filter((s) => s.sandboxAccess).map((s) => s.id),
  ];
  const secretId = (prefix: string): string => Object.entries(resources).find(([id, r]) => r.Type === "AWS::SecretsManager::Secret" && id.startsWith(prefix))?.[0] ?? "";
  /**
   * The sandbox access key's readers: whatever creates sandboxes (their SIDECAR_TOKEN), signs
   * sidecar access, or calls the agent (its password derives from the session's key): the sandbox
   * steps, the agent and sidecar routes, and the WebSocket routes that reach the agent; plus the
   * routes sandboxes call back on (they verify a sandbox's signature, and read no provider credential).
   */
  const keyReaders = (): string[] => [
    ...FLOW_STEPS.filter((s) => s.sandboxAccess).map((s) => s.id),
    ...HTTP_ROUTES.filter((r) => r.agentAccess || r.sandboxAccess || r.verifiesSandboxes).map((r) => r.id),
    ...WS_ROUTES.filter((r) => r.agentAccess).map((r) => r.id),
    // A late joiner gets the agent's pending permission questions (issue 25): SendInit asks the agent.
    "SendInit",
    ...BUILD_KEY_HOLDERS,
  ];

  it("are a generated secret: no credential value in the template", () => {
    template.hasResourceProperties("AWS::SecretsManager::Secret", {
      Name: `${stack.stackName}/sandbox-providers`,
      GenerateSecretString: Match.objectLike({ SecretStringTemplate: "{}" }),
      SecretString: Match.absent(),
    });
  });

  it("are readable by the sandbox-facing functions only", () => {
    const secret = secretId("ProviderSecret");
    const key = secretId("SandboxAccessKey");
    expect(secret).not.toBe("");
    expect(key).not.toBe("");
    const readers = secretReaders();
    const signers = keyReaders();
    expect(readers.length).toBeGreaterThan(0);
    expect(signers.sort()).toEqual(
      [
        "ProvisionStep",
        "QuiesceStep",
        "SnapshotStep",
        "TerminateStep",
        "DiscardStep",
        "FinishStep",
        // Commit terminates (pause, stop) and runs Finish in process (issue 15).
        "CommitStep",
        // A build sandbox's key (issue 24): derived at provision for the build id.
        "BuildProvisionStep",
        "CreatePrompt",
        "CreateSidecarAccess",
        "SandboxGitCredential",
        "SandboxEnvValues",
        // The agent's own tools (issue 25 §4): they verify the sidecar's signature too.
        "SandboxSaveSnapshot",
        "SandboxSnapshotStatus",
        "SandboxServiceCommands",
        "SandboxEnvFiles",
        "SandboxEnvRequest",
        "SandboxVerification",
        "WsMessage",
        "SendInit",
      ].sort(),
    );
    for (const id of ["SandboxGitCredential", "SandboxEnvValues", "SandboxSaveSnapshot", "SandboxSnapshotStatus", "SandboxServiceCommands", "SandboxEnvFiles", "SandboxEnvRequest", "SandboxVerification"]) expect(readers, id).not.toContain(id);
    // Neither the sweeper nor schedule-fired talks to an agent (they start flows), nor do the other WebSocket functions.
    for (const id of ["Sweeper", "ScheduleFired", "WsConnect", "WsDisconnect"]) expect(signers, id).not.toContain(id);
    for (const id of Object.keys(stack.functions)) {
      const reads = resourcesFor(statementsOfFunction(id), "secretsmanager:GetSecretValue");
      // RecordFailure reads the Slack bot token (an automation run's `notify.slackChannel`).
      const expected = [...(readers.includes(id) ? [{ Ref: secret }] : []), ...(signers.includes(id) ? [{ Ref: key }] : []), ...(id === "RecordFailureStep" ? [stack.resolve(stack.slack.secret.secretArn)] : [])];
      expect(reads, id).toEqual(expect.arrayContaining(expected));
      expect(reads, id).toHaveLength(expected.length);
      expect(envOf(id).PROVIDER_SECRET_ARN, id).toEqual(readers.includes(id) ? { Ref: secret } : undefined);
      expect(envOf(id).SANDBOX_ACCESS_KEY_SECRET_ARN, id).toEqual(signers.includes(id) ? { Ref: key } : undefined);
    }
  });

  it("sandboxes are told where to call back: the provision step has the HTTP API's URL", () => {
    const url = envOf("ProvisionStep").CONTROL_PLANE_URL as unknown;
    expect(JSON.stringify(url)).toContain("HttpApi");
    expect(envOf("ProvisionStep").SANDBOX_GIT_PULL_ON_RESTORE).toBeUndefined();
  });

  it("the sandbox access key is generated in the stack, never in the template", () => {
    template.hasResourceProperties("AWS::SecretsManager::Secret", {
      Name: `${stack.stackName}/sandbox-access-key`,
      GenerateSecretString: Match.objectLike({ PasswordLength: 64, ExcludePunctuation: true }),
      SecretString: Match.absent(),
    });
  });

  it("can be an existing secret instead (context providerSecretArn)", () => {
    const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sandbox-providers-AbCdEf";
    const other = synth({ providerSecretArn: arn });
    try {
      // Only the generated sandbox access key remains.
      other.template.resourceCountIs("AWS::SecretsManager::Secret", 1);
      const step = FLOW_STEPS.find((s) => s.sandboxAccess);
      expect(stackQueries(other).envOf(step?.id ?? "").PROVIDER_SECRET_ARN).toBe(arn);
    } finally {
      rmSync(other.dir, { recursive: true, force: true });
    }
  });
});

describe("idle snapshotting (seed 002)", () => {
  it("the idle-snapshot flow has a state machine whose Task states are the step functions", () => {
    expect(deployableFlows()).toContain("idle-snapshot");
    const machine = resources[logicalIdOf(stack.stateMachines["idle-snapshot"])];
    expect(machine?.Properties.StateMachineName).toBe(`${stack.stackName}-idle-snapshot`);
    const substitutions = machine?.Properties.DefinitionSubstitutions as Record<string, unknown>;
    const tasks = deepTasks(JSON.parse(machine?.Properties.DefinitionString as string) as unknown);
    expect(tasks.length).toBeGreaterThan(0);
    const stepIds = new Set<string>();
    for (const task of tasks) {
      const variable = /^\$\{([A-Za-z0-9_]+)\}$/.exec(String(task.Resource))?.[1] ?? "";
      const step = FLOW_STEPS.find((s) => stepArnVariable(s) === variable);
      expect(step, String(task.Resource)).toBeDefined();
      expect(substitutions[variable]).toEqual(stack.resolve(stack.functions[step?.id ?? ""]?.functionArn));
      stepIds.add(step?.id ?? "");
    }
    // It snapshots and always finishes (lease release, retry or circuit breaker).
    expect([...stepIds]).toEqual(expect.arrayContaining(["BeginStep", "SnapshotStep", "FinishStep"]));
  });

  it("the sweeper function: 300 s, 1024 MB, table read/write, provider credentials, starts idle-snapshot only, arms schedules", () => {
    const fn = resources[logicalIdOf(stack.functions.Sweeper)];
    expect(fn?.Properties).toMatchObject({ Runtime: "nodejs22.x", Architectures: ["arm64"], Timeout: 300, MemorySize: 1024, Handler: "index.handler" });
    const statements = statementsOfFunction("Sweeper");
    expect(actionsOf(statements)).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:PutItem"]));
    expect(resourcesFor(statements, "states:StartExecution")).toEqual([resolvedMachineArn("idle-snapshot")]);
    expect(Object.keys(envOf("Sweeper")).filter((k) => k.startsWith("STATE_MACHINE_ARN_"))).toEqual([stateMachineArnEnvName("idle-snapshot")]);
    expectSchedulingGrant(statements, "Sweeper");
    const secret = Object.entries(resources).find(([, r]) => r.Type === "AWS::SecretsManager::Secret")?.[0] ?? "";
    expect(resourcesFor(statements, "secretsmanager:GetSecretValue")).toEqual([{ Ref: secret }]);
    expect(envOf("Sweeper").SWEEPER_INTERVAL_SECONDS).toBe(String(DEFAULT_SWEEPER_INTERVAL_SECONDS));
    // It pushes nothing.
    expect(actionsOf(statements).filter((a) => a.startsWith("execute-api:"))).toEqual([]);
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "Errors",
      Namespace: "AWS/Lambda",
      Dimensions: [{ Name: "FunctionName", Value: { Ref: logicalIdOf(stack.functions.Sweeper) } }],
    });
  });

  it("a rate schedule (every SWEEPER_INTERVAL_SECONDS, default 10 minutes, no flexible window) invokes the sweeper with the scheduler role", () => {
    expect(DEFAULT_SWEEPER_INTERVAL_SECONDS).toBe(parseConfig({ TABLE_NAME: "t" }).SWEEPER_INTERVAL_SECONDS);
    const schedules = Object.values(resources).filter((r) => r.Type === "AWS::Scheduler::Schedule");
    // The sweeper's, the prebuild rebuild's and the metering pass's.
    expect(schedules).toHaveLength(3);
    const schedule = resources[logicalIdOf(stack.sweeperSchedule)];
    expect(schedules).toContainEqual(schedule);
    expect(schedule?.Properties).toMatchObject({
      ScheduleExpression: "rate(10 minutes)",
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      Target: {
        Arn: getAtt(logicalIdOf(stack.functions.Sweeper)),
        RoleArn: getAtt(logicalIdOf(findRoleAssumedBy("scheduler.amazonaws.com"))),
      },
    });
    // Not in the lifecycle group, whose schedules the functions create and delete at run time.
    const groupName = schedule?.Properties.GroupName;
    expect(groupName).not.toBe(`${stack.stackName}-lifecycle`);
    template.hasResourceProperties("AWS::Scheduler::ScheduleGroup", { Name: groupName });
  });

  it("the metering pass (usage, limits and credits): every minute, no flexible window, in the maintenance group; reads and writes the table and starts the pause flow only", () => {
    expect(METERING_RATE_MINUTES * 60).toBe(parseConfig({ TABLE_NAME: "t" }).METERING_INTERVAL_SECONDS);
    const schedule = resources[logicalIdOf(stack.meteringSchedule)];
    expect(schedule?.Properties).toMatchObject({
      ScheduleExpression: "rate(1 minute)",
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      Target: { Arn: getAtt(logicalIdOf(stack.functions.Metering)), RoleArn: getAtt(logicalIdOf(findRoleAssumedBy("scheduler.amazonaws.com"))) },
    });
    expect(schedule?.Properties.GroupName).toEqual(resources[logicalIdOf(stack.sweeperSchedule)]?.Properties.GroupName);
    const statements = statementsOfFunction("Metering");
    expect(resourcesFor(statements, "states:StartExecution")).toEqual([resolvedMachineArn("pause")]);
    expect(Object.keys(envOf("Metering")).filter((k) => k.startsWith("STATE_MACHINE_ARN_"))).toEqual([stateMachineArnEnvName("pause")]);
    expect(envOf("Metering").METERING_INTERVAL_SECONDS).toBe("60");
    const actions = actionsOf(statements);
    expect(actions).toEqual(expect.arrayContaining(["dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:GetItem"]));
    // No provider credentials, no schedules, no pushes.
    expect(actions.filter((a) => a.startsWith("secretsmanager:") || a.startsWith("scheduler:") || a.startsWith("execute-api:"))).toEqual([]);
  });

  it("the sweeper interval is a stack setting in whole minutes, at least one (context sweeperIntervalSeconds)", () => {
    expect(sweeperRateMinutes(600)).toBe(10);
    expect(sweeperRateMinutes(60)).toBe(1);
    expect(sweeperRateMinutes(20)).toBe(1);
    expect(sweeperRateMinutes(150)).toBe(3);
    expect(() => sweeperRateMinutes(0)).toThrow(/sweeperIntervalSeconds/);
    expect(() => sweeperRateMinutes(Number.NaN)).toThrow(/sweeperIntervalSeconds/);
    const other = synth({ sweeperIntervalSeconds: "60" });
    try {
      const q2 = stackQueries(other);
      const all = Object.values(other.resources);
      expect(all.find((r) => r.Type === "AWS::Scheduler::Schedule")?.Properties.ScheduleExpression).toBe("rate(1 minute)");
      expect(q2.envOf("Sweeper").SWEEPER_INTERVAL_SECONDS).toBe("60");
      const orphanAlarm = all.find((r) => r.Type === "AWS::CloudWatch::Alarm" && r.Properties.MetricName === METRIC_NAMES.orphansFound);
      expect(orphanAlarm?.Properties.Period).toBe(60);
    } finally {
      rmSync(other.dir, { recursive: true, force: true });
    }
  });

  it("alarms on circuit breaker trips (5 min) and on orphan sessions (one sweeper interval), as the functions publish them", () => {
    // Powertools Metrics: the stack's namespace, and `service` = POWERTOOLS_SERVICE_NAME as the one dimension.
    for (const id of ["FinishStep", "Sweeper"]) {
      expect(envOf(id).POWERTOOLS_METRICS_NAMESPACE, id).toBe(METRICS_NAMESPACE);
      expect(envOf(id).POWERTOOLS_SERVICE_NAME, id).toBe(FUNCTIONS_SERVICE_NAME);
    }
    const expected = [
      { alarm: stack.idleAlarms.circuitBreakerTrips, metric: METRIC_NAMES.circuitBreakerTrips, period: 300 },
      { alarm: stack.idleAlarms.orphanSessions, metric: METRIC_NAMES.orphansFound, period: DEFAULT_SWEEPER_INTERVAL_SECONDS },
    ];
    expect(expected.map((e) => e.metric)).toEqual(["IdleSnapshotCircuitBreakerTrips", "OrphanSessionsFound"]);
    for (const { alarm, metric, period } of expected) {
      expect(resources[logicalIdOf(alarm)]?.Properties, metric).toMatchObject({
        Namespace: "SandboxControlPlane",
        MetricName: metric,
        Dimensions: [{ Name: "service", Value: "sandbox-control-plane" }],
        Statistic: "Sum",
        Period: period,
        Threshold: 1,
        EvaluationPeriods: 1,
        ComparisonOperator: "GreaterThanOrEqualToThreshold",
        TreatMissingData: "notBreaching",
        AlarmDescription: expect.stringMatching(/.+/),
      });
    }
  });
});
