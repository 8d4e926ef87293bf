/**
 * Lifecycle flows in AWS (ARCHITECTURE.md §5): one Standard state machine per
 * `statemachines/<flow>.asl.json` that exists, with each Task's `${<StepId>FunctionArn}`
 * substituted by that step's Lambda function ARN (direct invocation: the function's result is the
 * state's output, a thrown error's `name` is the Step Functions error name).
 *
 * Machines have fixed names so their ARNs are known before they exist: the finish step and the
 * flow-starting routes reference the ARN as a string, while each machine references its steps'
 * ARNs; with the machine's own `Ref` the two would form a dependency cycle.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { ArnFormat, Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData, type Metric } from "aws-cdk-lib/aws-cloudwatch";
import { Effect, PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunction, IFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import { DefinitionBody, LogLevel, StateMachine, StateMachineType } from "aws-cdk-lib/aws-stepfunctions";
import type { Construct, IConstruct } from "constructs";
import { FLOW_NAMES, type FlowName } from "../functions/ports/flow-runner";
import { stateMachineArnEnvName } from "../functions/adapters/aws/sfn-flow-runner";
import { REPO_ROOT } from "./handler-function";

/**
 * Default upper bound of one flow execution: above its worst path, every Task at its Lambda
 * timeout for every attempt its retriers allow (provision alone: 15 minutes x 4), so a slow but
 * healthy flow is never cut off by the machine's timeout, where no Catch runs
 * (test/infra/limits.test.ts).
 */
const FLOW_TIMEOUT = Duration.hours(3);

export function flowDefinitionPath(flow: FlowName): string {
  return path.join(REPO_ROOT, "statemachines", `${flow}.asl.json`);
}

/** Flows with an ASL file: adding `statemachines/<flow>.asl.json` adds its state machine. */
export function deployableFlows(): FlowName[] {
  return FLOW_NAMES.filter((flow) => existsSync(flowDefinitionPath(flow)));
}

/** `ensure-runtime` → `EnsureRuntime`, for construct ids. */
export function flowConstructId(flow: FlowName): string {
  return flow.replace(/(^|-)([a-z])/g, (_m, _dash: string, c: string) => c.toUpperCase());
}

interface AslStates {
  States?: Record<string, AslState>;
}
interface AslDefinition extends AslStates {
  TimeoutSeconds?: number;
}
interface AslState {
  Type?: string;
  Resource?: string;
  Branches?: AslStates[];
  ItemProcessor?: AslStates;
  Iterator?: AslStates;
}

/** Every Task state's `Resource` in an ASL document, including Parallel branches and Map processors. */
export function taskResources(definition: AslStates): string[] {
  const out: string[] = [];
  for (const state of Object.values(definition.States ?? {})) {
    if (state.Type === "Task" && typeof state.Resource === "string") out.push(state.Resource);
    for (const branch of state.Branches ?? []) out.push(...taskResources(branch));
    if (state.ItemProcessor) out.push(...taskResources(state.ItemProcessor));
    if (state.Iterator) out.push(...taskResources(state.Iterator));
  }
  return out;
}

/** The substitution variables (`X` of `${X}`) the Task states of a definition use. */
export function substitutionVariables(resources: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const resource of resources) for (const m of resource.matchAll(/\$\{([A-Za-z0-9_]+)\}/g)) if (m[1]) names.add(m[1]);
  return names;
}

export function readFlowDefinition(flow: FlowName): AslDefinition {
  return JSON.parse(readFileSync(flowDefinitionPath(flow), "utf8")) as AslDefinition;
}

export function stateMachineName(stack: Stack, flow: FlowName): string {
  return `${stack.stackName}-${flow}`;
}

/** The ARN a machine will have, without a reference to it (see the module comment). */
export function stateMachineArn(stack: Stack, flow: FlowName): string {
  return stack.formatArn({ service: "states", resource: "stateMachine", resourceName: stateMachineName(stack, flow), arnFormat: ArnFormat.COLON_RESOURCE_NAME });
}

/** The ARN pattern of a machine's executions (`DescribeExecution` resources). */
export function executionArnPattern(stack: Stack, flow: FlowName): string {
  return stack.formatArn({ service: "states", resource: "execution", resourceName: `${stateMachineName(stack, flow)}:*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
}

/**
 * What starting the given flows takes: `STATE_MACHINE_ARN_<FLOW>` (what `SfnFlowRunner` reads),
 * `states:StartExecution` on exactly those machines and `states:DescribeExecution` on their
 * executions (a taken execution name is joined only while that execution runs). A flow without an ASL file fails the
 * synth, naming the caller, rather than deploying a caller bound to a machine that is missing.
 */
export function flowStartGrant(stack: Stack, flows: readonly FlowName[], caller: string): { environment: Record<string, string>; statements: PolicyStatement[] } {
  const available = deployableFlows();
  const environment: Record<string, string> = {};
  for (const flow of flows) {
    if (!available.includes(flow)) throw new Error(`${caller} starts the ${flow} flow, but ${path.relative(REPO_ROOT, flowDefinitionPath(flow))} does not exist`);
    environment[stateMachineArnEnvName(flow)] = stateMachineArn(stack, flow);
  }
  const statements = [
    new PolicyStatement({ effect: Effect.ALLOW, actions: ["states:StartExecution"], resources: flows.map((flow) => stateMachineArn(stack, flow)) }),
    new PolicyStatement({ effect: Effect.ALLOW, actions: ["states:DescribeExecution"], resources: flows.map((flow) => executionArnPattern(stack, flow)) }),
  ];
  return { environment, statements };
}

/** `flowStartGrant` bound to a Lambda function (its environment and its role). */
export function allowStartingFlows(fn: LambdaFunction, flows: readonly FlowName[], caller: string): void {
  if (flows.length === 0) return;
  const { environment, statements } = flowStartGrant(Stack.of(fn), flows, caller);
  for (const [name, value] of Object.entries(environment)) fn.addEnvironment(name, value);
  for (const statement of statements) fn.addToRolePolicy(statement);
  acknowledgeExecutionWildcards(fn.role ?? fn, flows);
}

/** cdk-nag: the executions of the given machines are named at run time (`<flow>-<session>-<fence>`). */
export function acknowledgeExecutionWildcards(role: IConstruct, flows: readonly FlowName[]): void {
  const stack = Stack.of(role);
  for (const flow of flows) {
    Validations.of(role).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:${stateMachineName(stack, flow)}:*]`,
      reason: "Executions are named per session and fence at run time; DescribeExecution is limited to the executions of this one state machine.",
    });
  }
}

export interface FlowStateMachineProps {
  flow: FlowName;
  /** Step functions by substitution variable (`stepArnVariable(step)`). */
  stepFunctions: ReadonlyMap<string, IFunction>;
}

export function createFlowStateMachine(scope: Construct, props: FlowStateMachineProps): StateMachine {
  const { flow } = props;
  const stack = Stack.of(scope);
  const id = `${flowConstructId(flow)}Flow`;
  const definition = readFlowDefinition(flow);
  const used = substitutionVariables(taskResources(definition));
  const invoked: IFunction[] = [];
  for (const variable of used) {
    const fn = props.stepFunctions.get(variable);
    if (!fn) throw new Error(`statemachines/${flow}.asl.json uses \${${variable}}, which is no step in FLOW_STEPS`);
    invoked.push(fn);
  }

  // `/aws/vendedlogs/` keeps the log delivery resource policy to one wildcard entry.
  const logGroup = new LogGroup(scope, `${id}Logs`, {
    logGroupName: `/aws/vendedlogs/states/${stateMachineName(stack, flow)}`,
    retention: RetentionDays.ONE_MONTH,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const machine = new StateMachine(scope, id, {
    stateMachineName: stateMachineName(stack, flow),
    stateMachineType: StateMachineType.STANDARD,
    // The file's content inline rather than `fromFile`: a state machine's timeout is the
    // definition's top-level TimeoutSeconds, which CDK cannot add to a file asset (its `timeout`
    // prop is silently ignored there). A file that sets its own TimeoutSeconds keeps it.
    definitionBody: DefinitionBody.fromString(JSON.stringify({ ...definition, TimeoutSeconds: definition.TimeoutSeconds ?? FLOW_TIMEOUT.toSeconds() })),
    definitionSubstitutions: Object.fromEntries([...props.stepFunctions].map(([variable, fn]) => [variable, fn.functionArn])),
    tracingEnabled: true,
    // Execution data would hold only session ids, but it stays out of the logs all the same.
    logs: { destination: logGroup, level: LogLevel.ALL, includeExecutionData: false },
  });
  // Only the functions this definition names, and only their unqualified ARNs (what a Task's
  // Resource is): no version or alias wildcard.
  machine.addToRolePolicy(
    new PolicyStatement({ effect: Effect.ALLOW, actions: ["lambda:InvokeFunction"], resources: invoked.map((fn) => fn.functionArn) }),
  );

  const alarm = (suffix: string, metric: Metric, what: string): Alarm =>
    new Alarm(scope, `${id}${suffix}`, {
      metric,
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `${flow} flow: ${what} in the last 5 minutes`,
    });
  alarm("ExecutionsFailed", machine.metricFailed({ period: Duration.minutes(5) }), "an execution failed");
  alarm("ExecutionsTimedOut", machine.metricTimedOut({ period: Duration.minutes(5) }), "an execution timed out");
  return machine;
}
