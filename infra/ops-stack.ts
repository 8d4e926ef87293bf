/**
 * Operations (issue 19; ARCHITECTURE.md §9 "Operations") in a nested stack of its own (the root
 * stack is near CloudFormation's 500-resource limit): four CloudWatch dashboards and the alarms
 * the issue names, every one notifying the root's alarm topic.
 *
 * - Dashboards `<stack>-Health`, `<stack>-Lifecycle`, `<stack>-Cost`, `<stack>-Consumers`, made by
 *   cdk-monitoring-constructs' DynamicDashboardFactory; its Monitoring classes draw the AWS-service
 *   widgets (HTTP API, Lambda, Step Functions, DynamoDB, SQS, the relay's Fargate service), and the
 *   business widgets come from our EMF metrics, each named from the one registry
 *   (functions/observability/metric-registry.ts). test/infra/ops-dashboards.test.ts fails when a
 *   widget or alarm names a metric the registry does not hold, or a registered metric is nowhere.
 * - Alarms: API 5xx rate, relay running tasks below the minimum, time to running p95, idle lag
 *   p99 over 2 s, the lifecycle schedules' dead letters (the queue lives here), and the composite `control plane unhealthy` over them and the root's own
 *   (circuit breaker, orphan sessions, Slack dead letters). Every description is a runbook line:
 *   what to check first.
 * - Idle sandbox-seconds avoided in dollars at per-second provider prices (`-c providerPricesPerSecond=`).
 */
import { Duration, NestedStack, Validations, type NestedStackProps, type Stack } from "aws-cdk-lib";
import type { HttpApi, WebSocketApi } from "aws-cdk-lib/aws-apigatewayv2";
import {
  Alarm,
  AlarmRule,
  AlarmState,
  AlarmStatusWidget,
  ComparisonOperator,
  CompositeAlarm,
  type Dashboard,
  GraphWidget,
  HorizontalAnnotation,
  MathExpression,
  Metric,
  type IAlarm,
  type IMetric,
  type IWidget,
  Stats,
  TextWidget,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import type { Table } from "aws-cdk-lib/aws-dynamodb";
import type { FargateService, ICluster } from "aws-cdk-lib/aws-ecs";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import type { ITopic } from "aws-cdk-lib/aws-sns";
import { Queue, QueueEncryption, type IQueue } from "aws-cdk-lib/aws-sqs";
import type { StateMachine } from "aws-cdk-lib/aws-stepfunctions";
import {
  ApiGatewayV2HttpApiMonitoring,
  DynamicDashboardFactory,
  DynamoTableMonitoring,
  FargateServiceMonitoring,
  LambdaFunctionMonitoring,
  MonitoringFacade,
  SqsQueueMonitoring,
  StepFunctionMonitoring,
  type IDynamicDashboardSegment,
} from "cdk-monitoring-constructs";
import type { Construct } from "constructs";
import { PROVIDER_TYPES } from "../functions/domain/session";
import { DEFAULT_PROVIDER_PRICES_PER_SECOND, METRICS, START_KINDS, type MetricDefinition } from "../functions/observability/metric-registry";

/** The lifecycle schedules' dead-letter queue (its ARN is built by the root from this name: see control-plane-stack.ts). */
export function scheduleDeadLetterQueueName(stackName: string): string {
  return `${stackName}-schedule-dead-letters`;
}

export const OPS_DASHBOARDS = ["Health", "Lifecycle", "Cost", "Consumers"] as const;
export type OpsDashboard = (typeof OPS_DASHBOARDS)[number];

/** The DynamoDB operations the code calls (AWS/DynamoDB's Operation dimension). */
const DYNAMODB_OPERATIONS = ["GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem", "TransactGetItems", "TransactWriteItems"] as const;

/** Providers that run in AWS (the local provider cannot run in Lambda). */
const CLOUD_PROVIDERS = PROVIDER_TYPES.filter((p) => p !== "local");

/** Time to running p95 above this for 15 minutes alarms (`-c timeToRunningP95Ms=`). */
export const DEFAULT_TIME_TO_RUNNING_P95_MS = 90_000;
/** Idle lag p99 above this alarms (issue 19: 2 s). */
export const IDLE_LAG_P99_MS = 2_000;
/** HTTP API 5xx share (percent of requests, at least API_5XX_MIN_REQUESTS in the period) that alarms. */
export const API_5XX_RATE_PERCENT = 5;
export const API_5XX_MIN_REQUESTS = 20;
/** Slack retries an event its endpoint did not acknowledge within 3 s (drawn on the ack's latency graph). */
export const SLACK_ACK_DEADLINE_MS = 3_000;

export interface OpsStackProps extends NestedStackProps {
  root: Stack;
  metricsNamespace: string;
  /** The root's functions by id (HTTP routes share a function per group: deduplicated here). */
  functions: Record<string, NodejsFunction>;
  stateMachines: Record<string, StateMachine>;
  table: Table;
  httpApi: HttpApi;
  webSocketApi: WebSocketApi;
  relay: { service: FargateService; cluster: ICluster; minTasks: number };
  slack: { ack: NodejsFunction; worker: NodejsFunction; queue: IQueue; deadLetterQueue: IQueue; deadLetterAlarm: IAlarm };
  /** Every EventBridge Scheduler group of the stack (lifecycle, maintenance, automations). */
  scheduleGroups: string[];
  /** The root's alarms the composite includes. */
  rootAlarms: IAlarm[];
  alarmTopic: ITopic;
  providerPricesPerSecond?: Record<string, number>;
  timeToRunningP95Ms?: number;
}

class Segment implements IDynamicDashboardSegment {
  readonly widgets: Record<OpsDashboard, IWidget[]> = { Health: [], Lifecycle: [], Cost: [], Consumers: [] };
  widgetsForDashboard(name: string): IWidget[] {
    return this.widgets[name as OpsDashboard] ?? [];
  }
}

export class OpsStack extends NestedStack {
  readonly dashboards: Record<OpsDashboard, Dashboard>;
  readonly alarms: { api5xxRate: Alarm; relayTasksBelowMinimum: Alarm; timeToRunningP95: Alarm; idleLagP99: Alarm; scheduleDeadLetters: Alarm };
  /** Lifecycle schedule invocations that failed every retry (EventBridge Scheduler's DeadLetterConfig). */
  readonly scheduleDeadLetters: Queue;
  readonly unhealthy: CompositeAlarm;

  constructor(scope: Construct, id: string, props: OpsStackProps) {
    super(scope, id, { ...props, description: "Operations: dashboards and alarms (issue 19)" });
    const ns = props.metricsNamespace;
    const period = Duration.minutes(5);
    const prices = { ...DEFAULT_PROVIDER_PRICES_PER_SECOND, ...(props.providerPricesPerSecond ?? {}) };

    /** One of our metrics with exactly one of its registered dimension sets. */
    const emf = (def: MetricDefinition, statistic: string, dimensions: Record<string, string> = {}, label?: string): Metric =>
      new Metric({ namespace: ns, metricName: def.name, dimensionsMap: { service: def.service, ...dimensions }, statistic, period, ...(label ? { label } : {}) });
    /** Every series of a metric over one of its dimension sets (a SEARCH expression: dashboards only, never alarms). */
    const search = (def: MetricDefinition, statistic: string, dims: readonly string[], filter = ""): MathExpression =>
      new MathExpression({
        expression: `SEARCH('{"${ns}",${["service", ...dims].join(",")}} MetricName="${def.name}" service="${def.service}"${filter ? ` ${filter}` : ""}', '${statistic}', ${period.toSeconds()})`,
        usingMetrics: {},
        label: "",
        period,
      });
    const graph = (title: string, left: IMetric[], options: { right?: IMetric[]; width?: number; annotation?: HorizontalAnnotation } = {}): GraphWidget =>
      new GraphWidget({ title, left, right: options.right ?? [], width: options.width ?? 8, height: 6, ...(options.annotation ? { leftAnnotations: [options.annotation] } : {}) });

    const facade = new MonitoringFacade(this, "Monitoring", {
      metricFactoryDefaults: { namespace: ns },
      alarmFactoryDefaults: { actionsEnabled: true, alarmNamePrefix: props.root.stackName },
      dashboardFactory: new DynamicDashboardFactory(this, "Dashboards", { dashboardNamePrefix: props.root.stackName, dashboardConfigs: OPS_DASHBOARDS.map((name) => ({ name })) }),
    });
    const seg = new Segment();
    const add = (dashboard: OpsDashboard, ...widgets: IWidget[]) => seg.widgets[dashboard].push(...widgets);
    const header = (dashboard: OpsDashboard, markdown: string) => add(dashboard, new TextWidget({ markdown, width: 24, height: 2 }));

    // ---- Alarms (each description: what to check first). ----
    const api5xxRate = new Alarm(this, "Api5xxRate", {
      metric: new MathExpression({
        expression: `IF(requests >= ${API_5XX_MIN_REQUESTS}, 100 * errors / requests, 0)`,
        usingMetrics: { errors: props.httpApi.metricServerError({ period, statistic: Stats.SUM }), requests: props.httpApi.metricCount({ period, statistic: Stats.SUM }) },
        period,
        label: "HTTP API 5xx %",
      }),
      threshold: API_5XX_RATE_PERCENT,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `Runbook: over ${API_5XX_RATE_PERCENT}% of HTTP API requests answered 5xx. Check first the Health dashboard's "HTTP requests by route and status" for the route, then that route's Lambda Errors alarm and its log group (requestId in every line).`,
    });
    const runningTasks = new Metric({
      namespace: "ECS/ContainerInsights",
      metricName: "RunningTaskCount",
      dimensionsMap: { ClusterName: props.relay.cluster.clusterName, ServiceName: props.relay.service.serviceName },
      statistic: Stats.MINIMUM,
      period: Duration.minutes(1),
    });
    const relayTasksBelowMinimum = new Alarm(this, "RelayTasksBelowMinimum", {
      metric: runningTasks,
      threshold: props.relay.minTasks,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
      comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.BREACHING,
      alarmDescription: `Runbook: fewer than ${props.relay.minTasks} relay tasks running: streams are not being held. Check first the relay ECS service's events (failed health checks, image pull, capacity) and the stopped tasks' stop reason.`,
    });
    const ttrMetrics: Record<string, IMetric> = {};
    for (const provider of CLOUD_PROVIDERS) {
      for (const kind of START_KINDS) ttrMetrics[`${provider}_${kind}`] = emf(METRICS.timeToRunning, "p95", { Provider: provider, StartKind: kind });
    }
    const ttrThreshold = props.timeToRunningP95Ms ?? DEFAULT_TIME_TO_RUNNING_P95_MS;
    const timeToRunningP95 = new Alarm(this, "TimeToRunningP95", {
      metric: new MathExpression({ expression: `MAX([${Object.keys(ttrMetrics).join(",")}])`, usingMetrics: ttrMetrics, period: Duration.minutes(15), label: "time to running p95 (worst provider and start kind)" }),
      threshold: ttrThreshold,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `Runbook: sessions take over ${ttrThreshold / 1000} s (p95) to reach running. Check first the Lifecycle dashboard's time to running by provider and start kind, then "provider call duration" for that provider's createSandbox, and the provider's status page.`,
    });
    const idleLagP99 = new Alarm(this, "IdleLagP99", {
      metric: emf(METRICS.idleLag, "p99").with({ period: Duration.minutes(15) }),
      threshold: IDLE_LAG_P99_MS,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `Runbook: idle snapshots start over ${IDLE_LAG_P99_MS / 1000} s (p99) after the grace ran out: idle sandboxes cost money. Check first the schedule-fired function's errors and throttles and the Scheduler's target errors on the Health dashboard.`,
    });
    this.scheduleDeadLetters = new Queue(this, "ScheduleDeadLetters", {
      queueName: scheduleDeadLetterQueueName(props.root.stackName),
      retentionPeriod: Duration.days(14),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    Validations.of(this.scheduleDeadLetters).acknowledge({ id: "AwsSolutions::AwsSolutions-SQS3", reason: "This is the dead-letter queue of the lifecycle schedules; an alarm fires on anything in it." });
    const scheduleDeadLetters = new Alarm(this, "ScheduleDeadLettersVisible", {
      metric: this.scheduleDeadLetters.metricApproximateNumberOfMessagesVisible({ period }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription:
        "Runbook: a lifecycle schedule (expiry, idle check) or maintenance schedule failed every retry and sits in the dead-letter queue: its session may miss a migration or an idle snapshot. Check first the schedule-fired function's errors and logs, then read the message (it names the session and purpose) and re-run its check.",
    });
    this.alarms = { api5xxRate, relayTasksBelowMinimum, timeToRunningP95, idleLagP99, scheduleDeadLetters };
    const childAlarms: IAlarm[] = [api5xxRate, relayTasksBelowMinimum, timeToRunningP95, idleLagP99, scheduleDeadLetters, props.slack.deadLetterAlarm, ...props.rootAlarms];
    this.unhealthy = new CompositeAlarm(this, "ControlPlaneUnhealthy", {
      compositeAlarmName: `${props.root.stackName}-control-plane-unhealthy`,
      alarmRule: AlarmRule.anyOf(...childAlarms.map((a) => AlarmRule.fromAlarm(a, AlarmState.ALARM))),
      alarmDescription: "Runbook: the control plane is unhealthy: one of its key alarms fires. Check first which child alarm is in ALARM (the Health dashboard's alarm widget) and follow that alarm's runbook line.",
    });
    const action = new SnsAction(props.alarmTopic);
    this.unhealthy.addAlarmAction(action);
    this.unhealthy.addOkAction(action);

    // ---- Health. ----
    header("Health", `# ${props.root.stackName}: health\nAPI errors and latency by route, functions, flows, schedules, relay, table. Alarms notify the alarm topic.`);
    add("Health", new AlarmStatusWidget({ title: "Alarms", alarms: [...childAlarms, this.unhealthy], width: 24, height: 4 }));
    add("Health", ...new ApiGatewayV2HttpApiMonitoring(facade, { api: props.httpApi, alarmFriendlyName: "HttpApi" }).widgets());
    add(
      "Health",
      graph("HTTP requests by route and status (4xx, 5xx)", [search(METRICS.httpRequests, "Sum", ["Route", "Status"], 'Status=("400" OR "401" OR "402" OR "403" OR "404" OR "409" OR "413" OR "422" OR "429" OR "500" OR "502" OR "503")')], { width: 12 }),
      graph("HTTP handler latency p99 by route", [search(METRICS.httpLatency, "p99", ["Route", "Status"])], { width: 12 }),
    );
    const seen = new Set<NodejsFunction>();
    for (const [name, fn] of Object.entries(props.functions)) {
      if (seen.has(fn)) continue;
      seen.add(fn);
      add("Health", ...new LambdaFunctionMonitoring(facade, { lambdaFunction: fn, alarmFriendlyName: name, humanReadableName: name }).summaryWidgets());
    }
    // Every function of the stack once (the Slack pair is drawn on Consumers; their throttles and concurrency count here too).
    const ourFunctions = [...seen, ...[props.slack.ack, props.slack.worker].filter((fn) => !seen.has(fn))];
    const functionLabel = new Map<NodejsFunction, string>();
    for (const [name, fn] of [...Object.entries(props.functions), ["SlackAck", props.slack.ack] as const, ["SlackWorker", props.slack.worker] as const]) if (!functionLabel.has(fn)) functionLabel.set(fn, name);
    add(
      "Health",
      graph(
        "Lambda throttles (Sum) by function",
        ourFunctions.map((fn) => fn.metricThrottles({ statistic: Stats.SUM, period, label: functionLabel.get(fn) ?? fn.node.id })),
        { width: 12 },
      ),
      graph(
        "Lambda concurrent executions (Maximum) by function",
        ourFunctions.map((fn) => fn.metric("ConcurrentExecutions", { statistic: Stats.MAXIMUM, period, label: functionLabel.get(fn) ?? fn.node.id })),
        { width: 12 },
      ),
    );
    add("Health", graph("Function invocations that threw (flow steps, schedule target, sweeper)", [search(METRICS.stepInvocations, "Sum", ["Function", "Outcome"], 'Outcome="error"')], { width: 12 }));
    add(
      "Health",
      graph(
        "Scheduler: target errors, dropped and throttled invocations",
        props.scheduleGroups.flatMap((group) =>
          ["TargetErrorCount", "InvocationDroppedCount", "InvocationThrottleCount"].map((metricName) => new Metric({ namespace: "AWS/Scheduler", metricName, dimensionsMap: { ScheduleGroup: group }, statistic: Stats.SUM, period, label: `${group} ${metricName}` })),
        ),
        { width: 12 },
      ),
    );
    for (const [flow, machine] of Object.entries(props.stateMachines)) {
      add("Health", ...new StepFunctionMonitoring(facade, { stateMachine: machine, alarmFriendlyName: flow, humanReadableName: `flow ${flow}` }).summaryWidgets());
    }
    add("Health", ...new SqsQueueMonitoring(facade, { queue: this.scheduleDeadLetters, alarmFriendlyName: "ScheduleDeadLetters", humanReadableName: "Schedule dead letters" }).summaryWidgets());
    add("Health", ...new SqsQueueMonitoring(facade, { queue: props.slack.deadLetterQueue, alarmFriendlyName: "SlackDeadLetters", humanReadableName: "Slack dead letters" }).summaryWidgets());
    add("Health", ...new FargateServiceMonitoring(facade, { fargateService: props.relay.service, alarmFriendlyName: "Relay", humanReadableName: "Relay (Fargate)" }).summaryWidgets());
    add(
      "Health",
      graph("Relay: running tasks, held streams per task", [runningTasks.with({ label: "running tasks" })], {
        right: [emf(METRICS.heldStreams, Stats.AVERAGE, {}, "held streams per task (avg)"), emf(METRICS.heldStreams, Stats.MAXIMUM, {}, "held streams (busiest task)")],
        annotation: { value: props.relay.minTasks, label: "minimum tasks" },
      }),
      graph("Relay takeovers and reconnects", [emf(METRICS.relayTakeovers, Stats.SUM, {}, "sessions taken over from another relay")], {
        right: [search(METRICS.relayStreamsLost, "Sum", ["Reason"])],
      }),
    );
    add("Health", ...new DynamoTableMonitoring(facade, { table: props.table, alarmFriendlyName: "SessionTable" }).summaryWidgets());
    const tableDims = { TableName: props.table.tableName };
    add(
      "Health",
      graph(
        "DynamoDB throttles: read/write throttle events, throttled requests by operation",
        ["ReadThrottleEvents", "WriteThrottleEvents"].map((metricName) => new Metric({ namespace: "AWS/DynamoDB", metricName, dimensionsMap: tableDims, statistic: Stats.SUM, period, label: metricName })),
        {
          width: 12,
          right: DYNAMODB_OPERATIONS.map(
            (operation) => new Metric({ namespace: "AWS/DynamoDB", metricName: "ThrottledRequests", dimensionsMap: { ...tableDims, Operation: operation }, statistic: Stats.SUM, period, label: `throttled ${operation}` }),
          ),
        },
      ),
    );

    // ---- Lifecycle. ----
    header("Lifecycle", `# ${props.root.stackName}: lifecycle\nTime to running by provider and start kind, flows, idle snapshotting, sweeper, prompt queue.`);
    for (const stat of ["p50", "p95", "p99"]) {
      add(
        "Lifecycle",
        graph(`Time to running ${stat} by provider and start kind`, [search(METRICS.timeToRunning, stat, ["Provider", "StartKind"])], stat === "p95" ? { annotation: { value: ttrThreshold, label: "alarm" } } : {}),
      );
    }
    add(
      "Lifecycle",
      graph("Running sessions by provider (metering pass)", [search(METRICS.runningSessions, "Maximum", ["Provider"])]),
      graph("Sessions by status (metering pass: starting, running, paused, error)", [search(METRICS.sessionsByStatus, "Maximum", ["Status"])]),
    );
    const flowDuration = (stat: string) =>
      Object.entries(props.stateMachines).map(([flow, machine]) => machine.metric("ExecutionTime", { statistic: stat, period, label: `${flow} ${stat}` }));
    add("Lifecycle", graph("Flow durations p50 (pause, snapshot, migrate, ...)", flowDuration("p50"), { width: 12 }), graph("Flow durations p99", flowDuration("p99"), { width: 12 }));
    add(
      "Lifecycle",
      graph("Idle lag p99 (grace expiry to snapshot)", [emf(METRICS.idleLag, "p99", {}, "idle lag p99"), emf(METRICS.idleLag, "p50", {}, "idle lag p50")], { annotation: { value: IDLE_LAG_P99_MS, label: "alarm" } }),
      graph("Idle snapshots and failures by mode", [search(METRICS.idleSnapshots, "Sum", ["mode"])], { right: [search(METRICS.idleSnapshotFailures, "Sum", ["mode"])] }),
      graph("Idle snapshot duration p95 by method", [search(METRICS.idleSnapshotDuration, "p95", ["method"])]),
      graph("Circuit breaker trips, orphans found, orphan sandboxes terminated", [
        emf(METRICS.circuitBreakerTrips, Stats.SUM, {}, "circuit breaker trips"),
        emf(METRICS.orphansFound, Stats.SUM, {}, "orphan sessions found"),
        emf(METRICS.orphanSandboxesTerminated, Stats.SUM, {}, "sandboxes terminated by the sweeper"),
      ]),
      graph("Prompt queue wait", [emf(METRICS.promptQueueWait, "p50", {}, "p50"), emf(METRICS.promptQueueWait, "p95", {}, "p95"), emf(METRICS.promptQueueWait, "p99", {}, "p99")]),
      graph("Provider call duration p95 by provider and operation", [search(METRICS.providerCallDuration, "p95", ["Provider", "Operation"])]),
      graph("Provider call errors by provider and operation", [search(METRICS.providerCallErrors, "Sum", ["Provider", "Operation"])]),
    );

    // ---- Cost. ----
    header("Cost", `# ${props.root.stackName}: cost\nSandbox seconds, idle seconds avoided and their dollars at ${CLOUD_PROVIDERS.map((p) => `${p} $${prices[p]}/s`).join(", ")} (\`-c providerPricesPerSecond=\`), credit pauses, AWS requests per lifecycle.`);
    const avoided: Record<string, IMetric> = {};
    for (const provider of CLOUD_PROVIDERS) avoided[`avoided_${provider}`] = emf(METRICS.idleSecondsAvoided, Stats.SUM, { Provider: provider }, `${provider} idle sandbox-seconds avoided`);
    add(
      "Cost",
      graph("Running sandbox-seconds by provider", [search(METRICS.sandboxSeconds, "Sum", ["Provider"])], { width: 12 }),
      graph("Active seconds by org (metered)", [search(METRICS.activeSeconds, "Sum", ["orgId"])], { width: 12 }),
      graph("Idle sandbox-seconds avoided by provider, and dollars", Object.values(avoided), {
        width: 12,
        right: [
          new MathExpression({
            expression: CLOUD_PROVIDERS.map((p) => `FILL(avoided_${p}, 0) * ${prices[p] ?? 0}`).join(" + "),
            usingMetrics: avoided,
            period,
            label: "USD avoided",
          }),
        ],
      }),
      graph("Credit pauses (org credits spent)", [emf(METRICS.creditPauses, Stats.SUM, {}, "sessions paused: credit_limit")]),
    );
    const started: Record<string, IMetric> = {};
    for (const [flow, machine] of Object.entries(props.stateMachines)) started[`started_${flow.replace(/[^A-Za-z0-9]/g, "_")}`] = machine.metricStarted({ period, statistic: Stats.SUM });
    const dynamo = {
      reads: props.table.metricConsumedReadCapacityUnits({ period, statistic: Stats.SUM }),
      writes: props.table.metricConsumedWriteCapacityUnits({ period, statistic: Stats.SUM }),
      ...started,
    };
    const flowsStarted = Object.keys(started).join(" + ");
    add(
      "Cost",
      graph("DynamoDB capacity units per flow execution", [
        new MathExpression({ expression: `reads / (${flowsStarted})`, usingMetrics: dynamo, period, label: "read units per flow" }),
        new MathExpression({ expression: `writes / (${flowsStarted})`, usingMetrics: dynamo, period, label: "write units per flow" }),
      ]),
      graph("Flow executions started", Object.entries(props.stateMachines).map(([flow, machine]) => machine.metricStarted({ period, statistic: Stats.SUM, label: flow }))),
    );
    // AWS requests per lifecycle (one create or resume: an ensure-runtime execution started). Step Functions
    // publishes no per-state-machine transition count (only the account-wide StateTransition usage), hence the title.
    const ensureRuntime = props.stateMachines["ensure-runtime"];
    if (!ensureRuntime) throw new Error("no ensure-runtime state machine");
    const requests: Record<string, IMetric> = { lifecycles: ensureRuntime.metricStarted({ period, statistic: Stats.SUM }) };
    const ddbIds = DYNAMODB_OPERATIONS.map((operation) => {
      const id = `ddb_${operation}`;
      requests[id] = new Metric({ namespace: "AWS/DynamoDB", metricName: "SuccessfulRequestLatency", dimensionsMap: { ...tableDims, Operation: operation }, statistic: Stats.SAMPLE_COUNT, period });
      return id;
    });
    const lambdaIds = ourFunctions.map((fn, i) => {
      const id = `fn_${i}`;
      requests[id] = fn.metricInvocations({ period, statistic: Stats.SUM });
      return id;
    });
    const schedulerIds = props.scheduleGroups.map((group, i) => {
      const id = `sch_${i}`;
      requests[id] = new Metric({ namespace: "AWS/Scheduler", metricName: "InvocationAttemptCount", dimensionsMap: { ScheduleGroup: group }, statistic: Stats.SUM, period });
      return id;
    });
    const perLifecycle = (ids: string[], label: string) =>
      new MathExpression({ expression: `IF(lifecycles > 0, SUM(FILL([${ids.join(",")}], 0)) / lifecycles)`, usingMetrics: requests, period, label });
    add(
      "Cost",
      graph(
        "AWS requests per lifecycle (ensure-runtime started); Step Functions transitions not included: no per-state-machine metric",
        [
          perLifecycle(ddbIds, "DynamoDB requests"),
          perLifecycle(lambdaIds, "Lambda invocations"),
          perLifecycle(schedulerIds, "Scheduler invocation attempts"),
          perLifecycle([...ddbIds, ...lambdaIds, ...schedulerIds], "all of them"),
        ],
        { width: 24 },
      ),
    );

    // ---- Consumers. ----
    header("Consumers", `# ${props.root.stackName}: consumers\nSlack (ack latency, deliveries), WebSocket connections, automation runs.`);
    const ackMonitoring = new LambdaFunctionMonitoring(facade, { lambdaFunction: props.slack.ack, alarmFriendlyName: "SlackAck", humanReadableName: "Slack ack (latency: Slack wants < 3 s)" });
    // Its latency graph draws the annotations its alarms add; Slack's 3 s deadline is one more line there.
    ackMonitoring.latencyAnnotations.push({ value: SLACK_ACK_DEADLINE_MS, label: "Slack's 3 s deadline" });
    add("Consumers", ...ackMonitoring.summaryWidgets());
    add("Consumers", ...new SqsQueueMonitoring(facade, { queue: props.slack.queue, alarmFriendlyName: "SlackDeliveries", humanReadableName: "Slack deliveries" }).summaryWidgets());
    add("Consumers", ...new LambdaFunctionMonitoring(facade, { lambdaFunction: props.slack.worker, alarmFriendlyName: "SlackWorker", humanReadableName: "Slack worker" }).summaryWidgets());
    const wsApi = { ApiId: props.webSocketApi.apiId };
    add(
      "Consumers",
      graph("WebSocket connections and messages", [
        new Metric({ namespace: "AWS/ApiGateway", metricName: "ConnectCount", dimensionsMap: wsApi, statistic: Stats.SUM, period, label: "connects" }),
        new Metric({ namespace: "AWS/ApiGateway", metricName: "MessageCount", dimensionsMap: wsApi, statistic: Stats.SUM, period, label: "messages" }),
      ]),
      graph("WebSocket route invocations by status", [search(METRICS.wsRequests, "Sum", ["Route", "Status"])], { width: 16 }),
    );
    add(
      "Consumers",
      graph("Automation runs by status", [search(METRICS.automationRuns, "Sum", ["Status"])], { width: 12 }),
      graph("Automation firing lag (scheduled -> handled)", [emf(METRICS.automationFiringLag, "p50", {}, "p50"), emf(METRICS.automationFiringLag, "p99", {}, "p99")], { width: 12 }),
    );

    facade.addDynamicSegment(seg);
    const factory = facade.dashboardFactory as DynamicDashboardFactory;
    const byName = (name: OpsDashboard) => {
      const d = factory.getDashboard(name);
      if (!d) throw new Error(`no ${name} dashboard`);
      return d;
    };
    this.dashboards = { Health: byName("Health"), Lifecycle: byName("Lifecycle"), Cost: byName("Cost"), Consumers: byName("Consumers") };
  }
}
