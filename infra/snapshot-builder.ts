/**
 * The snapshot builder in AWS (API.md "Repositories and prebuilds"): one Standard state machine
 * from statemachines/builds/snapshot-builder.asl.json with each Task's `${<Step>FunctionArn}`
 * substituted by its step's Lambda (functions/builds/build-steps.ts), and the grant that lets a
 * route or the scheduled rebuild start it. The machine has a fixed name, so its ARN is known to
 * the routes before it exists (as for the lifecycle flows, infra/lifecycle-flows.ts).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { ArnFormat, Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { Effect, PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunction, IFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import { DefinitionBody, LogLevel, StateMachine, StateMachineType } from "aws-cdk-lib/aws-stepfunctions";
import type { Construct } from "constructs";
import { BUILD_STATE_MACHINE_ARN_ENV } from "../functions/adapters/aws/sfn-build-runner";
import { BUILD_FLOW } from "../functions/builds/build-steps";
import { BUILD_MAX_RUNNING_SECONDS } from "../functions/builds/build-sandbox";
import { REPO_ROOT } from "./handler-function";
import { substitutionVariables, taskResources } from "./lifecycle-flows";

export const BUILD_DEFINITION_FILE = path.join(REPO_ROOT, "statemachines", "builds", `${BUILD_FLOW}.asl.json`);

/** Above the worst path: provision and setup at Lambda's maximum for every attempt their retriers allow (the sweeper protects a build's sandbox this long at most). */
const BUILD_TIMEOUT = Duration.seconds(BUILD_MAX_RUNNING_SECONDS);

export function builderStateMachineName(stack: Stack): string {
  return `${stack.stackName}-${BUILD_FLOW}`;
}

export function builderStateMachineArn(stack: Stack): string {
  return stack.formatArn({ service: "states", resource: "stateMachine", resourceName: builderStateMachineName(stack), arnFormat: ArnFormat.COLON_RESOURCE_NAME });
}

/** `STATE_MACHINE_ARN_SNAPSHOT_BUILDER` and `states:StartExecution` on the builder only (executions are named after builds). */
export function allowStartingBuilds(fn: LambdaFunction): void {
  const stack = Stack.of(fn);
  fn.addEnvironment(BUILD_STATE_MACHINE_ARN_ENV, builderStateMachineArn(stack));
  fn.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ["states:StartExecution"], resources: [builderStateMachineArn(stack)] }));
}

export function createSnapshotBuilder(scope: Construct, stepFunctions: ReadonlyMap<string, IFunction>): StateMachine {
  const stack = Stack.of(scope);
  const definition = JSON.parse(readFileSync(BUILD_DEFINITION_FILE, "utf8")) as Parameters<typeof taskResources>[0] & { TimeoutSeconds?: number };
  const invoked: IFunction[] = [];
  for (const variable of substitutionVariables(taskResources(definition))) {
    const fn = stepFunctions.get(variable);
    if (!fn) throw new Error(`statemachines/builds/${BUILD_FLOW}.asl.json uses \${${variable}}, which is no step in BUILD_STEPS`);
    invoked.push(fn);
  }
  const logGroup = new LogGroup(scope, "SnapshotBuilderLogs", {
    logGroupName: `/aws/vendedlogs/states/${builderStateMachineName(stack)}`,
    retention: RetentionDays.ONE_MONTH,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const machine = new StateMachine(scope, "SnapshotBuilder", {
    stateMachineName: builderStateMachineName(stack),
    stateMachineType: StateMachineType.STANDARD,
    definitionBody: DefinitionBody.fromString(JSON.stringify({ ...definition, TimeoutSeconds: definition.TimeoutSeconds ?? BUILD_TIMEOUT.toSeconds() })),
    definitionSubstitutions: Object.fromEntries([...stepFunctions].map(([variable, fn]) => [variable, fn.functionArn])),
    tracingEnabled: true,
    logs: { destination: logGroup, level: LogLevel.ALL, includeExecutionData: false },
  });
  machine.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ["lambda:InvokeFunction"], resources: invoked.map((fn) => fn.functionArn) }));
  Validations.of(machine.role).acknowledge({
    id: "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
    reason: "Log delivery and X-Ray support no resource-level permissions.",
  });
  new Alarm(scope, "SnapshotBuilderExecutionsFailed", {
    metric: machine.metricFailed({ period: Duration.minutes(5) }),
    threshold: 1,
    evaluationPeriods: 1,
    comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: "snapshot builder: an execution failed (not a failed build: the machine itself) in the last 5 minutes",
  });
  return machine;
}
