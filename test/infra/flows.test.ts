/**
 * Lifecycle flows in the stack: state machines bound to the right step functions, least-privilege
 * roles for the machines, the scheduler and the functions that start flows or arm schedules.
 * Synthesized without bundling (the bundles and cdk-nag are covered by control-plane-stack.test.ts).
 */
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArnFormat } from "aws-cdk-lib";
import { Match, type Template } from "aws-cdk-lib/assertions";
import type { IConstruct } from "constructs";
import type { ControlPlaneStack } from "../../infra/control-plane-stack";
import { deployableFlows, flowDefinitionPath, stateMachineArn, taskResources } from "../../infra/lifecycle-flows";
import { stateMachineArnEnvName } from "../../functions/adapters/aws/sfn-flow-runner";
import { FLOW_STEPS, stepArnVariable } from "../../functions/flows/steps";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { FLOW_NAMES, type FlowName } from "../../functions/ports/flow-runner";
import { actionsOf, asArray, getAtt, resourcesFor, stackQueries, synthWithoutBundling as synth, type Resources } from "./stack-queries";

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
    expect(names).toEqual(expected.map((flow) => `${stack.stackName}-${flow}`).sort());
  });

  it("are Standard, traced, logged at ALL without execution data, and time out after an hour", () => {
    for (const flow of deployableFlows()) {
      const machine = resources[logicalIdOf(stack.stateMachines[flow])];
      expect(machine?.Properties).toMatchObject({
        StateMachineName: `${stack.stackName}-${flow}`,
        StateMachineType: "STANDARD",
        TracingConfiguration: { Enabled: true },
        LoggingConfiguration: { Level: "ALL", IncludeExecutionData: false },
      });
      const definition = JSON.parse(machine?.Properties.DefinitionString as string) as { TimeoutSeconds?: number };
      expect(definition.TimeoutSeconds, flow).toBe(3600);
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

  it("orchestrating steps start ensure-runtime and arm schedules in the lifecycle group only", () => {
    const orchestrators = FLOW_STEPS.filter((s) => s.orchestrates);
    expect(orchestrators.length).toBeGreaterThan(0);
    const schedulerRoleArn = envOf(orchestrators[0]?.id ?? "").SCHEDULE_ROLE_ARN;
    const groupSchedules = stack.resolve(stack.formatArn({ service: "scheduler", resource: "schedule", resourceName: `${stack.stackName}-lifecycle/*` }));
    for (const step of orchestrators) {
      const statements = statementsOfFunction(step.id);
      expect(resourcesFor(statements, "states:StartExecution")).toEqual([resolvedMachineArn("ensure-runtime")]);
      expect(envOf(step.id)[stateMachineArnEnvName("ensure-runtime")]).toEqual(resolvedMachineArn("ensure-runtime"));
      for (const action of ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule"]) {
        expect(resourcesFor(statements, action), action).toEqual([groupSchedules]);
      }
      const passRole = statements.filter((s) => asArray(s.Action).includes("iam:PassRole"));
      expect(passRole).toEqual([
        expect.objectContaining({ Resource: schedulerRoleArn, Condition: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } } }),
      ]);
      expect(actionsOf(statements).filter((a) => a.startsWith("scheduler:"))).toHaveLength(4);
    }
  });

  it("other steps cannot start flows, arm schedules or pass roles", () => {
    for (const step of FLOW_STEPS.filter((s) => !s.orchestrates)) {
      const actions = actionsOf(statementsOfFunction(step.id));
      expect(actions.filter((a) => a.startsWith("states:") || a.startsWith("scheduler:") || a === "iam:PassRole"), step.id).toEqual([]);
      expect(Object.keys(envOf(step.id)).filter((k) => k.startsWith("STATE_MACHINE_ARN_")), step.id).toEqual([]);
    }
  });

  it("every flow Lambda gets the schedule settings its cold start requires", () => {
    const scheduleFired = logicalIdOf(stack.functions.ScheduleFired);
    expect(resources[scheduleFired]?.Properties.FunctionName).toBe(`${stack.stackName}-schedule-fired`);
    const targetArn = stack.resolve(stack.formatArn({ service: "lambda", resource: "function", resourceName: `${stack.stackName}-schedule-fired`, arnFormat: ArnFormat.COLON_RESOURCE_NAME }));
    for (const id of [...FLOW_STEPS.map((s) => s.id), "ScheduleFired"]) {
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

  it("assumes a role (same account only) that can invoke schedule-fired and nothing else", () => {
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
    expect(actionsOf(statements)).toEqual(["lambda:InvokeFunction"]);
    expect(resourcesFor(statements, "lambda:InvokeFunction")).toEqual([getAtt(logicalIdOf(stack.functions.ScheduleFired))]);
  });

  it("schedule-fired reads the table and starts migrate only", () => {
    const statements = statementsOfFunction("ScheduleFired");
    expect(resourcesFor(statements, "states:StartExecution")).toEqual([resolvedMachineArn("migrate")]);
    expect(envOf("ScheduleFired")[stateMachineArnEnvName("migrate")]).toEqual(resolvedMachineArn("migrate"));
    const actions = actionsOf(statements);
    expect(actions).toContain("dynamodb:GetItem");
    expect(actions).not.toContain("dynamodb:PutItem");
    expect(actions.filter((a) => a.startsWith("scheduler:") || a === "iam:PassRole")).toEqual([]);
  });
});

describe("HTTP routes that start flows", () => {
  it("get the ARN and states:StartExecution for exactly the flows they declare", () => {
    for (const route of HTTP_ROUTES) {
      const flows = route.startsFlows ?? [];
      const statements = statementsOfFunction(route.id);
      expect(new Set(resourcesFor(statements, "states:StartExecution").map((r) => JSON.stringify(r))), route.id).toEqual(
        new Set(flows.map((f) => JSON.stringify(resolvedMachineArn(f)))),
      );
      const envArns = Object.keys(envOf(route.id)).filter((k) => k.startsWith("STATE_MACHINE_ARN_")).sort();
      expect(envArns, route.id).toEqual(flows.map(stateMachineArnEnvName).sort());
    }
  });
});

describe("provider credentials", () => {
  const secretReaders = (): string[] => [...FLOW_STEPS.filter((s) => s.sandboxAccess).map((s) => s.id), ...HTTP_ROUTES.filter((r) => r.agentAccess).map((r) => r.id)];

  it("are a generated secret: no credential value in the template", () => {
    template.hasResourceProperties("AWS::SecretsManager::Secret", {
      Name: `${stack.stackName}/sandbox-providers`,
      GenerateSecretString: Match.objectLike({ SecretStringTemplate: "{}" }),
      SecretString: Match.absent(),
    });
  });

  it("are readable by the sandbox-facing functions only", () => {
    const secret = Object.entries(resources).find(([, r]) => r.Type === "AWS::SecretsManager::Secret")?.[0] ?? "";
    const readers = secretReaders();
    expect(readers.length).toBeGreaterThan(0);
    for (const id of Object.keys(stack.functions)) {
      const reads = resourcesFor(statementsOfFunction(id), "secretsmanager:GetSecretValue");
      if (readers.includes(id)) {
        expect(reads, id).toEqual([{ Ref: secret }]);
        expect(envOf(id).PROVIDER_SECRET_ARN, id).toEqual({ Ref: secret });
      } else {
        expect(reads, id).toEqual([]);
        expect(envOf(id).PROVIDER_SECRET_ARN, id).toBeUndefined();
      }
    }
  });

  it("can be an existing secret instead (context providerSecretArn)", () => {
    const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sandbox-providers-AbCdEf";
    const other = synth({ providerSecretArn: arn });
    try {
      other.template.resourceCountIs("AWS::SecretsManager::Secret", 0);
      const step = FLOW_STEPS.find((s) => s.sandboxAccess);
      expect(stackQueries(other).envOf(step?.id ?? "").PROVIDER_SECRET_ARN).toBe(arn);
    } finally {
      rmSync(other.dir, { recursive: true, force: true });
    }
  });
});
